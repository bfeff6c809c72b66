"""An increment decoded in worker processes equals the same rows decoded in one (``DecodePool``).

The rows hold every event type, an older schema version and every kind of bad record the Spark
decoder test uses (``tests/test_lakehouse_decode.py``), repeated so that each worker's slice starts
and ends in the middle of them; the slices must come back in bronze order, each type's rows in the
newest schema's columns, the rejected rows with the same reasons."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse.duck import silver_decode
from lakehouse.duck.arrow_types import silver_arrow_schema
from lakehouse.duck.silver_decode import DecodePool, decode_rows
from tests.test_lakehouse_decode import _records


def _bronze(bodies: list[bytes]) -> pa.Table:
    n = len(bodies)
    return pa.table(
        {
            "cluster": ["B"] * n,
            "topic": ["mirrorlake.events"] * n,
            "partition": pa.array([i % 3 for i in range(n)], pa.int32()),
            "offset": pa.array(range(n), pa.int64()),
            "value": pa.array(bodies, pa.binary()),
        }
    )


@pytest.fixture(scope="module")
def pool():
    with DecodePool(workers=2) as decoder:
        yield decoder


def test_workers_decode_what_one_process_does_in_bronze_order(pool, monkeypatch):
    bodies = [body for _ in range(7) for body in _records().values()]  # 7 rounds: slices split a round
    rows = _bronze(bodies)
    monkeypatch.setattr(silver_decode, "_FEWEST_FOR_WORKERS", 1)  # workers even for these few rows
    here, there = decode_rows(rows), pool.decode(rows)
    assert there.events.keys() == here.events.keys()
    for event_type, table in here.events.items():
        assert table.schema == silver_arrow_schema(event_type)
        assert there.events[event_type].equals(table), event_type
        offsets = table["state_offset"].to_pylist()
        assert offsets == sorted(offsets), f"{event_type}: not in bronze order"
    assert there.rejected == here.rejected
    assert {r["reason"] for r in here.rejected} >= {"not a mirrorlake event: bad header or unknown schema fingerprint"}
    decoded = sum(t.num_rows for t in here.events.values()) + len(here.rejected)
    assert decoded == rows.num_rows


def _same(left: silver_decode.Decoded, right: silver_decode.Decoded) -> bool:
    return (
        left.events.keys() == right.events.keys()
        and all(left.events[t].equals(right.events[t]) for t in left.events)
        and left.rejected == right.rejected
    )


def test_one_worker_or_few_rows_give_the_same_rows(pool):
    rows = _bronze(list(_records().values()))
    alone = DecodePool(workers=1)
    try:
        assert _same(alone.decode(rows), decode_rows(rows))
    finally:
        alone.close()
    assert _same(pool.decode(rows), decode_rows(rows))  # below the threshold: decoded here
