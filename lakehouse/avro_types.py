"""Spark types of the event schemas: what a decoded event looks like in a DataFrame.

The mapping both decoders produce (spark-avro's ``from_avro`` and the fastavro fallback in
``lakehouse.decode``): Avro primitives to their Spark types, ``["null", X]`` to a nullable X,
arrays, maps (string keys) and records to ``ArrayType``, ``MapType`` and ``StructType``.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import types as T

from replicator.events import SchemaRegistry, registry

__all__ = ["avro_to_spark", "record_struct", "event_spark_schema", "all_nullable"]

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
        return record_struct(avro_type), False
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind], False
    raise ValueError(f"unsupported Avro type {avro_type}")


def record_struct(schema: dict[str, Any]) -> T.StructType:
    """The struct of an Avro record schema (its fields in order)."""
    fields = []
    for f in schema["fields"]:
        dtype, nullable = avro_to_spark(f["type"])
        fields.append(T.StructField(f["name"], dtype, nullable))
    return T.StructType(fields)


def event_spark_schema(event_type: str, reg: SchemaRegistry | None = None) -> T.StructType:
    """The silver table schema of an event type: its newest Avro schema, flattened."""
    reg = reg or registry()
    return record_struct(reg.latest(event_type).schema)


def all_nullable(dtype: T.DataType) -> T.DataType:
    """``dtype`` with every field, element and map value nullable, at every depth (as Delta stores
    nested types, and what a cast from any decoder's nullability may target)."""
    if isinstance(dtype, T.StructType):
        return T.StructType([T.StructField(f.name, all_nullable(f.dataType), True) for f in dtype.fields])
    if isinstance(dtype, T.ArrayType):
        return T.ArrayType(all_nullable(dtype.elementType), True)
    if isinstance(dtype, T.MapType):
        return T.MapType(dtype.keyType, all_nullable(dtype.valueType), True)
    return dtype
