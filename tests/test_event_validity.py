"""Forged and damaged events (issue 33, item 2): one set of rules, the same verdict in both engines.

``replicator.events.validity.problem`` (the replicator's readers) and
``lakehouse.event_validity.invalid_reason`` (silver, in Spark) are held equal on generated events
whose values sit on every edge the rules draw: negative and huge partitions and offsets, topic
names of 0, 249 and 250 characters, ``.`` and ``..``, a final newline (Java's ``$`` matches
before it), non-ASCII, nulls. The pure tests say what each rule refuses and that the codec and
the state reader never hand such an event on.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replicator.errors import InvalidEventError
from replicator.events import Checkpoint, OffsetSync, Watermark
from replicator.events.codec import decode, encode
from replicator.events.validity import MAX_PARTITION, RULES, problem

BASE = {"flow": "A->B", "replicator_id": "r", "source_cluster": "A", "target_cluster": "B"}
EDGE_INTS = [-(2**63), -(2**31), -2, -1, 0, 1, 7, MAX_PARTITION, MAX_PARTITION + 1, 2**31, 2**63 - 1]
EDGE_TOPICS = [
    "",
    ".",
    "..",
    "...",
    "t",
    "A.t",
    "a-b_c.9",
    "t\n",
    "\nt",
    "a b",
    "a/b",
    "é",
    "t" * 249,
    "t" * 250,
    "../etc",
    "\x1b]0;x\x07",
]
_FIELD_TYPES = {"partition": "int", "partitions": "int", "topic": "string"}


def _kind(field: str) -> str:
    """The rule kind of ``field`` (one field name means one kind in every type)."""
    (kind,) = {r.kind for rules in RULES.values() for r in rules if r.field == field}
    return kind


FIELDS = sorted({r.field for rules in RULES.values() for r in rules})


def _spark_type(field: str) -> str:
    return "string" if _kind(field) == "topic" else _FIELD_TYPES.get(field, "bigint")


def _value(field: str):
    if _kind(field) == "topic":
        return st.none() | st.sampled_from(EDGE_TOPICS) | st.from_regex(r"[A-Za-z0-9._-]{1,20}", fullmatch=True)
    bound = 2**31 - 1 if _spark_type(field) == "int" else 2**63 - 1
    ints = st.sampled_from([i for i in EDGE_INTS if -bound - 1 <= i <= bound]) | st.integers(-bound - 1, bound)
    return st.none() | ints


RECORDS = st.lists(st.fixed_dictionaries({f: _value(f) for f in FIELDS}), min_size=1, max_size=80)


@pytest.mark.spark
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=RECORDS)
def test_spark_and_python_give_every_generated_event_the_same_verdict(spark, records):
    """One job per example: every row is judged under every type's rules at once (a field name
    means one thing in every type, so one row holds a value for each rule of each type)."""
    from lakehouse.event_validity import invalid_reason

    schema = ", ".join(f"`{f}` {_spark_type(f)}" for f in FIELDS)
    df = spark.createDataFrame([(i, *[r[f] for f in FIELDS]) for i, r in enumerate(records)], f"i int, {schema}")
    types = sorted(RULES)
    got = df.select("i", *[invalid_reason(t).alias(t) for t in types]).collect()
    for row in got:
        for t in types:
            assert row[t] == problem(t, records[row["i"]]), (t, records[row["i"]])
    assert spark.range(1).select(invalid_reason("group_sync").alias("x")).first()["x"] is None  # history: no rules


def _checkpoint(**changes) -> Checkpoint:
    values = dict(BASE, group="g", source_topic="t", target_topic="A.t", partition=0, upstream_offset=5,
                  downstream_offset=7, method="exact")  # fmt: skip
    return Checkpoint(**{**values, **changes})


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"partition": -1}, "checkpoint.partition -1 is not a partition"),
        ({"partition": 2**31 - 1}, "checkpoint.partition 2147483647 is not a partition"),
        ({"target_topic": "A t"}, "checkpoint.target_topic is not a legal Kafka topic name"),
        ({"source_topic": "t" * 250}, "checkpoint.source_topic is not a legal Kafka topic name"),
        ({"source_topic": ".."}, "checkpoint.source_topic is not a legal Kafka topic name"),
        ({"downstream_offset": -1}, "checkpoint.downstream_offset -1 is negative"),
        ({"upstream_offset": -2}, "checkpoint.upstream_offset -2 is negative"),
    ],
)
def test_a_forged_checkpoint_does_not_decode_to_an_event(changes, why):
    with pytest.raises(InvalidEventError, match="invalid event: " + why):
        decode(encode(_checkpoint(**changes)))


def test_valid_events_of_every_checked_type_decode_as_they_were():
    sync = OffsetSync(**BASE, source_topic="t", target_topic="A.t", partition=MAX_PARTITION, upstream_offset=0,
                      downstream_offset=2**63 - 1, upstream_timestamp_ms=-1, reason="first")  # fmt: skip
    mark = Watermark(flow="A->B", replicator_id="r", cluster="A", side="source", topic="t" * 249, source_topic="t",
                     partition=0, log_start_offset=5, log_end_offset=3, observed_at_ms=1)  # fmt: skip
    for event in (_checkpoint(), sync, mark):
        assert decode(encode(event)) == event
