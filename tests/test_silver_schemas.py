"""The silver table delta-rs creates for a type's first events is the one Spark's silver creates.

``lakehouse serve``'s increments create a silver table themselves when an event type shows up for
the first time (``lakehouse.duck.silver``), rather than hand the refresh to Spark; afterwards either
engine appends to it, and gold reads it on either engine. So its Delta schema (names, types,
nullability at every depth) must be Spark's ``silver_schema``, compared here as both write it to
the Delta log (no JVM: the Spark side is pyspark's type classes).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from deltalake import Schema

from lakehouse.duck.arrow_types import silver_arrow_schema
from replicator.events import registry


def _without_metadata(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _without_metadata(v) for k, v in schema.items() if k != "metadata"}
    if isinstance(schema, list):
        return [_without_metadata(v) for v in schema]
    return schema


@pytest.mark.parametrize("event_type", registry().event_types())
def test_the_silver_table_delta_rs_creates_has_spark_s_schema(event_type: str):
    from lakehouse.silver import silver_schema

    on_delta_rs = json.loads(Schema.from_arrow(silver_arrow_schema(event_type)).to_json())
    on_spark = json.loads(silver_schema(event_type).json())
    assert _without_metadata(on_delta_rs) == _without_metadata(on_spark)


def test_the_quarantine_delta_rs_creates_has_spark_s_schema():
    from lakehouse.duck.arrow_types import QUARANTINE_ARROW_SCHEMA
    from lakehouse.silver import QUARANTINE_SCHEMA

    on_delta_rs = json.loads(Schema.from_arrow(QUARANTINE_ARROW_SCHEMA).to_json())
    assert _without_metadata(on_delta_rs) == _without_metadata(json.loads(QUARANTINE_SCHEMA.json()))
