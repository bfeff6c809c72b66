"""Gold ``divergence`` names copies removed by compaction on the target, on hand-made silver rows
(Spark, no cluster): a window read again on a compacted target after the cleaner ran holds fewer
records than the source's (``replicator.tasks.audit``)."""

from __future__ import annotations

import duckdb
import pytest

from lakehouse.tables.divergence.spark import divergence
from lakehouse.tables.macros import install_macros
from replicator.events import AuditWindow, ConfigSnapshot, Event
from tests.test_lakehouse_failovers import T0, _silver

pytestmark = pytest.mark.spark


def _snapshot(topic: str, side: str, policy: str) -> ConfigSnapshot:
    cluster, name = ("A", topic) if side == "source" else ("B", f"A.{topic}")
    return ConfigSnapshot(flow="A->B", replicator_id="r", emitted_at_ms=T0, cluster=cluster, side=side, topic=name,
                          source_topic=topic, exists=True, partitions=1, configs={"cleanup.policy": policy},
                          config_sources={}, acls=(), digest=f"{topic}{side}", reason="change")  # fmt: skip


def _window(topic: str, side: str, count: int, checksum: int, t: int) -> AuditWindow:
    return AuditWindow(flow="A->B", replicator_id="r", emitted_at_ms=T0 + t, side=side,
                       cluster="A" if side == "source" else "B", source_topic=topic, target_topic=f"A.{topic}",
                       partition=0, window_start=0, window_end=1000, record_count=count, checksum=checksum,
                       first_offset=0, last_offset=999, extra_copies=0)  # fmt: skip


def test_a_window_a_compacted_target_lost_records_from_is_named_and_other_differences_stay_data(spark):
    snapshots: list[Event] = []
    for topic, target_policy in (("kv", "compact"), ("plain", "delete"), ("kv2", "compact,delete")):
        snapshots += [_snapshot(topic, "source", "delete"), _snapshot(topic, "target", target_policy)]
    audits = [
        _window("kv", "source", 1000, 7, 0),
        _window("kv", "target", 1000, 7, 1),  # the first audit: equal
        _window("kv", "target", 950, 5, 2),  # read again after the cleaner ran: 50 copies gone
        _window("plain", "source", 1000, 7, 0),
        _window("plain", "target", 999, 6, 1),  # a plain target lost one: a data difference
        _window("kv2", "source", 1000, 7, 0),
        _window("kv2", "target", 1000, 8, 1),  # same count, other content: altered, not compacted
    ]
    table = divergence(_silver(spark, "config_snapshot", snapshots), _silver(spark, "audit_window", audits))
    rows = table.collect()
    got = {(r["source_topic"], r["kind"], r["source_value"], r["target_value"]) for r in rows}
    src = "count=1000 checksum=7 extra_copies=0"
    assert got == {
        ("kv", "target_records_compacted", src, "count=950 checksum=5 extra_copies=0"),
        ("plain", "data", src, "count=999 checksum=6 extra_copies=0"),
        ("kv2", "data", src, "count=1000 checksum=8 extra_copies=0"),
        ("kv", "config", "delete", "compact"),  # the policy difference itself, reported as ever
        ("kv2", "config", "delete", "compact,delete"),
    }

    # the macro the dashboard's flow status and SQL users read: copies removed per partition
    con = duckdb.connect()
    con.register("divergence", table.toPandas())
    install_macros(con, ["divergence"])
    assert con.execute("SELECT * EXCLUDE (observed_at_ms) FROM compacted_on_target('A->B')").fetchall() == [
        ("kv", 0, 50, 1)
    ]
