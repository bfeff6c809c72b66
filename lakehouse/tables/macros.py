"""Every named SQL rule over the gold tables, in one place: the macros ``mirrorlake sql`` and the
dashboard call (``SELECT * FROM failover_plan('A->B')``).

Each rule says what it answers and which gold tables it reads; ``install_macros`` creates those whose
tables a connection has. The Python rules they restate (``replicator.client.mapping.translate``,
``replicator.failover``'s plan and cut) are held equal to them by ``tests/test_engine_harness.py``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import duckdb

from lakehouse.sql_quote import duck_string
from lakehouse.tables.offset_mapping.lives import current_life_sql, said_lives_sql
from replicator.client.failover_cost import DELETED_ON_TARGET

__all__ = ["Macro", "MACROS", "install_macros"]


_ONE_PARTITION = "SELECT * FROM offset_mapping WHERE flow = f AND source_topic = t AND partition = p"


@dataclass(frozen=True)
class Macro:
    """A named SQL rule: ``sql`` creates it; it needs the views ``reads``."""

    name: str
    answers: str
    reads: tuple[str, ...]
    sql: str


MACROS: tuple[Macro, ...] = (
    Macro(
        "current_offset_mapping",
        "one partition's segments of its current life: a re-created source topic's new offsets are "
        "never translated through the old topic's copies (as replicator.client.mapping_index)",
        ("offset_mapping",),
        f"""
CREATE OR REPLACE MACRO current_offset_mapping(f, t, p) AS TABLE
{current_life_sql(_ONE_PARTITION)};
""",
    ),
    Macro(
        "current_offset_mapping",
        "the same where silver topic_recreated exists: a life it says, not copied yet, is current "
        "(then the partition has no segment: nothing of the new topic is copied)",
        ("offset_mapping", "topic_recreated"),
        f"""
CREATE OR REPLACE MACRO current_offset_mapping(f, t, p) AS TABLE
{current_life_sql(_ONE_PARTITION, said_lives_sql("topic_recreated WHERE flow = f AND source_topic = t"))};
""",
    ),
    Macro(
        "translate_offset",
        "a committed source offset through the exact mapping, current life (as replicator.client.mapping.translate)",
        ("offset_mapping",),
        """
CREATE OR REPLACE MACRO translate_offset(f, t, p, c) AS (
    WITH m AS (SELECT * FROM current_offset_mapping(f, t, p))
    SELECT CASE WHEN covering.d IS NOT NULL THEN covering.d
                WHEN before.d IS NOT NULL THEN before.d
                ELSE after_.d END
    FROM (SELECT max_by(c + delta, downstream_start) AS d FROM m
          WHERE upstream_start <= c AND c <= upstream_end) covering,
         (SELECT arg_max(downstream_end + 1, struct_pack(e := upstream_end, d := downstream_end)) AS d
          FROM m WHERE upstream_end < c) before,
         (SELECT arg_min(downstream_start, struct_pack(s := upstream_start, d := -downstream_start)) AS d
          FROM m WHERE upstream_start > c) after_
);
""",
    ),
    Macro(
        "compacted_on_target",
        "per source partition, the copies compaction removed from a compacted target topic, summed over "
        "its audit windows read again after the cleaner ran (gold divergence's target_records_compacted "
        "rows); audited windows only: a group's exact figure comes from `mirrorlake failover plan`",
        ("divergence",),
        r"""
CREATE OR REPLACE MACRO compacted_on_target(f) AS TABLE
    SELECT source_topic, partition,
           sum(CAST(regexp_extract(source_value, 'count=(\d+)', 1) AS BIGINT)
               - CAST(regexp_extract(target_value, 'count=(\d+)', 1) AS BIGINT)) AS records_compacted_on_target,
           count(*) AS windows, max(observed_at_ms) AS observed_at_ms
    FROM divergence WHERE flow = f AND kind = 'target_records_compacted'
    GROUP BY source_topic, partition;
""",
    ),
    Macro(
        "translate_group",
        "every partition of a group's latest checkpoint, translated now",
        ("offset_mapping", "group_offsets"),
        """
CREATE OR REPLACE MACRO translate_group(f, g) AS TABLE
    SELECT source_topic, target_topic, partition, committed_offset,
           translate_offset(flow, source_topic, partition, committed_offset) AS target_offset,
           translated_offset AS checkpoint_offset, method, as_of_ms
    FROM group_offsets WHERE flow = f AND "group" = g ORDER BY source_topic, partition;
""",
    ),
    Macro(
        "rpo_now",
        "each partition's latest RPO observation of a flow",
        ("rpo",),
        """
CREATE OR REPLACE MACRO rpo_now(f) AS TABLE
    SELECT * FROM rpo WHERE flow = f
    QUALIFY row_number() OVER (PARTITION BY source_topic, partition
                               ORDER BY observed_at_ms DESC, watermark_event_id DESC) = 1
    ORDER BY source_topic, partition;
""",
    ),
    Macro(
        "failover_now",
        "per group and partition, what a failover now loses and re-reads (gold rpo_groups)",
        ("rpo_groups",),
        """
CREATE OR REPLACE MACRO failover_now(f) AS TABLE
    SELECT * FROM rpo_groups WHERE flow = f ORDER BY "group", source_topic, partition;
""",
    ),
    Macro(
        "consistent_cut",
        "the latest time up to which every partition of the flow was replicated at its last observation "
        "(the first unreplicated record's timestamp, never after the observation; the observation time when "
        "none; null when unknown: a "
        "partition with records at risk whose tail was not measured, a v1 watermark, whose age is only a "
        "bound), as replicator.failover's plan says",
        ("rpo",),
        """
CREATE OR REPLACE MACRO consistent_cut(f) AS TABLE
    SELECT CASE WHEN count(*) FILTER (WHERE records_unreplicated > 0 AND bytes_unreplicated IS NULL) > 0
                THEN NULL
                ELSE min(CASE WHEN records_unreplicated = 0 THEN observed_at_ms
                              ELSE observed_at_ms - CAST(round(seconds_unreplicated * 1000) AS BIGINT) END)
           END AS cut_ms,
           count(*) AS partitions,
           sum(records_unreplicated) AS records_unreplicated
    FROM rpo_now(f);
""",
    ),
    Macro(
        "failover_plan",
        "per group and partition, the exact translation's cost beside the partition's RPO (what "
        "replicator.failover's plan computes from the state topic alone); copies deleted from the target "
        "count as lost with their cause, a translation below the target's log start resumes at it",
        ("rpo", "rpo_groups"),
        """
CREATE OR REPLACE MACRO failover_plan(f) AS TABLE
    SELECT g."group", g.source_topic, g.partition, g.committed_offset,
           CASE WHEN g.exact_offset < g.target_log_start_offset THEN g.target_log_start_offset
                ELSE g.exact_offset END AS target_offset,
           g.records_lost_at_exact AS records_lost, g.records_deleted_on_target,
           CASE WHEN g.records_deleted_on_target > 0 AND g.records_lost_at_exact > 0
                THEN {DELETED_ON_TARGET} END AS lost_cause,
           g.records_reread_at_exact AS records_reread, g.records_unreplicated,
           r.records_unreplicated AS partition_records_unreplicated,
           r.bytes_unreplicated AS partition_bytes_unreplicated,
           r.seconds_unreplicated AS partition_seconds_unreplicated, g.as_of_ms
    FROM rpo_groups g LEFT JOIN rpo_now(f) r ON r.source_topic = g.source_topic AND r.partition = g.partition
    WHERE g.flow = f ORDER BY g."group", g.source_topic, g.partition;
""".replace("{DELETED_ON_TARGET}", duck_string(DELETED_ON_TARGET)),
    ),
)


def install_macros(con: duckdb.DuckDBPyConnection, views: Collection[str]) -> None:
    """Create every named macro whose tables exist among ``views`` (also on a bare connection, as
    the engine-equality tests do with an in-memory ``offset_mapping``)."""
    for macro in MACROS:
        if all(v in views for v in macro.reads):
            con.execute(macro.sql)
