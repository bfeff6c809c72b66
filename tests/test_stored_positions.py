"""Offsets an application stored itself, in the shapes the field's tools write (pure: no cluster)."""

from __future__ import annotations

import json

import pytest

from replicator.errors import TranslationError
from replicator.failover import StoredPosition, parse_positions

WANTED = [StoredPosition("orders", 0, 17), StoredPosition("orders", 1, 0), StoredPosition("pay.ments", 3, 9)]
OBJECTS = [{"topic": p.topic, "partition": p.partition, "offset": p.offset} for p in WANTED]


@pytest.mark.parametrize(
    "text",
    [
        "\n".join(json.dumps(o) for o in OBJECTS) + "\n",  # JSON lines
        json.dumps(OBJECTS),  # a JSON array
        json.dumps({"version": 1, "partitions": OBJECTS}),  # Kafka's tools' JSON
        json.dumps({"orders": {"0": 17, "1": 0}, "pay.ments": {"3": 9}}),  # Spark's Kafka source offsets
        "orders,0,17\norders,1,0\n\npay.ments,3,9\n",  # kafka-consumer-groups --reset-offsets --export
        " orders , 1 , 0 \npay.ments,3,9\norders,0,17",  # spaces, unsorted, no final newline
    ],
    ids=["jsonl", "array", "kafka-json", "spark", "csv", "csv-loose"],
)
def test_every_shape_gives_the_same_positions(text):
    assert parse_positions(text) == WANTED


def test_one_object_and_a_repeated_equal_position_are_fine():
    assert parse_positions('{"topic": "t", "partition": "2", "offset": "40"}') == [StoredPosition("t", 2, 40)]
    assert parse_positions("t,0,5\nt,0,5\n") == [StoredPosition("t", 0, 5)]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "no positions (empty input)"),
        ('{"topic": "t", "partition": 0}\n{"topic": "t", "partition": 1, "offset": 2}', "line 1: missing offset"),
        ('{"t": [1, 2]}', "where.t: expected {partition: offset}"),
        ('{"t": {"0": 1.5}}', "where.t.0: offset must be an integer, got 1.5"),
        ('{"t": {"x": 1}}', "where.t.x: partition must be an integer, got 'x'"),
        ('[{"topic": "", "partition": 0, "offset": 1}]', "where[0]: topic must be a non-empty string"),
        ('{"partitions": {"topic": "t"}}', "where.partitions: expected an array"),
        ("t,-1,5", "where line 1: partition -1 is negative"),
        ("t,0,true", "where line 1: offset must be an integer, got 'true'"),
        ('[{"topic": "t", "partition": true, "offset": 1}]', "partition must be an integer, got True"),
        ("42", "where line 1: expected topic,partition,offset (got 1 fields)"),
        ('{"partitions": []}', "where: no positions"),
    ],
)
def test_a_malformed_input_is_one_error_naming_where(text, needle):
    with pytest.raises(TranslationError) as info:
        parse_positions(text, "where")
    assert needle in str(info.value)
