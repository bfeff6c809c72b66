"""Gold ``failovers``' measured outcome and gold ``failbacks``, on hand-made silver rows (Spark, no cluster).

The outcome of a failover of A->B is what the reverse flow B->A's checkpoints saw of each moved
group on B afterwards (``lakehouse.tables.failovers``): its first and latest committed offsets there.
"""

from __future__ import annotations

import pytest

from lakehouse.silver import silver_schema
from lakehouse.tables.failbacks.spark import failbacks
from lakehouse.tables.failovers.spark import failovers
from replicator.events import Checkpoint, Event, Failback, FailbackOffset, FailbackRange, Failover, FailoverOffset

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000


def _silver(spark, event_type: str, events: list[Event]):
    schema = silver_schema(event_type)
    lineage = {"state_cluster": "B", "state_topic": "mirrorlake.events", "state_partition": 0}
    rows = [{**e.to_record(), **lineage, "state_offset": i} for i, e in enumerate(events)]
    return spark.createDataFrame([tuple(r.get(f.name) for f in schema.fields) for r in rows], schema)


def _reverse_checkpoint(group: str, committed: int, t: int) -> Checkpoint:
    """B->A's checkpoint of ``group`` on B's A.orders[0]: the group's committed offset on B."""
    return Checkpoint(flow="B->A", replicator_id="r2", emitted_at_ms=T0 + t, source_cluster="B",
                      target_cluster="A", group=group, source_topic="A.orders", target_topic="orders",
                      partition=0, upstream_offset=committed, downstream_offset=committed, method="exact")  # fmt: skip


def _failover(event_id: str, t: int, group: str, written: int) -> Failover:
    return Failover(flow="A->B", replicator_id="failover@h", event_id=event_id, emitted_at_ms=T0 + t,
                    source_cluster="A", target_cluster="B", mode="unplanned", groups=(group,),
                    offsets=(FailoverOffset(group, "orders", "A.orders", 0, written, written, 0, 0, 0),),
                    records_lost=0, records_reread=0, host="h", user="u")  # fmt: skip


def test_the_outcome_is_what_the_reverse_flow_saw_of_each_group_after_the_failover(spark):
    moved = [_failover("f1", 100, "rewound", 50), _failover("f2", 100, "resumed", 70), _failover("f3", 100, "quiet", 9)]
    seen = [
        _reverse_checkpoint("rewound", 60, 50),  # before the failover: not its outcome
        _reverse_checkpoint("rewound", 46, 200),  # reset below the written 50: re-read 4
        _reverse_checkpoint("rewound", 58, 300),
        _reverse_checkpoint("resumed", 70, 200),
        _reverse_checkpoint("resumed", 95, 400),
    ]
    rows = failovers(_silver(spark, "failover", moved), _silver(spark, "checkpoint", seen)).collect()
    got = {
        r["group"]: (r["outcome"], r["outcome_first_offset"], r["outcome_offset"], r["outcome_records_reread"],
                     r["outcome_records_consumed"], r["outcome_first_at_ms"] and r["outcome_first_at_ms"] - T0)
        for r in rows
    }  # fmt: skip
    assert got == {
        "rewound": ("rewound", 46, 58, 4, 8, 200),
        "resumed": ("resumed", 70, 95, 0, 25, 200),
        "quiet": ("not_observed", None, None, None, None, None),
    }


def test_failbacks_one_row_per_step_with_its_figures(spark):
    recover = Failback(flow="A->B", replicator_id="failback@h", event_id="b1", emitted_at_ms=T0 + 10,
                       source_cluster="A", target_cluster="B", action="recover", host="h", user="u", records=7,
                       ranges=(FailbackRange("orders", "A.orders", 0, 90, 95, 4, 40, 120, 124),
                               FailbackRange("orders", "A.orders", 1, 10, 13, 3, 30)))  # fmt: skip
    back = Failback(flow="A->B", replicator_id="failback@h", event_id="b2", emitted_at_ms=T0 + 20,
                    source_cluster="A", target_cluster="B", action="groups", host="h", user="u",
                    groups=("g1", "g2"), offsets=(FailbackOffset("g1", "orders", 0, 130, 99, "exact"),))  # fmt: skip
    rows = failbacks(_silver(spark, "failback", [recover, back])).orderBy("applied_at_ms").collect()
    got = [(r["action"], r["records"], r["ranges"], r["bytes"], r["groups"], r["offsets_written"]) for r in rows]
    assert got == [("recover", 7, 2, 70, "", 0), ("groups", 0, 0, 0, "g1,g2", 1)]
