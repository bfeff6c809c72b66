"""Queries behind the mapping, groups, divergence and failover pages (testable without Streamlit).

A missing table gives an empty ``DataFrame`` (the page names the command that fills it); the
translations go through the same SQL macro (``translate_offset``) as ``mirrorlake sql``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from dashboards.data_health import frame, has
from lakehouse.sql import LakehouseSQL
from replicator.client.mapping import Segment, TranslationMethod
from replicator.client.mapping import reverse_translate as reverse_translate_segments

__all__ = [
    "mapping_segments",
    "translate",
    "ReverseTranslation",
    "reverse_translate",
    "groups",
    "divergence",
    "rpo_now",
    "failover_now",
    "failover_plan",
    "consistent_cut",
    "failovers_applied",
    "failbacks_applied",
]


def mapping_segments(sql: LakehouseSQL, flow: str, topic: str | None = None) -> pd.DataFrame:
    """Segments of ``flow`` (optionally one source topic), ordered by partition and downstream offset."""
    if not has(sql, "offset_mapping"):
        return pd.DataFrame()
    where, params = "flow = ?", [flow]
    if topic:
        where, params = where + " AND source_topic = ?", [flow, topic]
    return sql.arrow(
        "SELECT source_topic, target_topic, partition, source_topic_id, target_topic_id, upstream_start, upstream_end, "
        f"downstream_start, downstream_end, delta, upstream_end - upstream_start + 1 AS records, last_synced_ms "
        f"FROM offset_mapping WHERE {where} ORDER BY source_topic, partition, downstream_start",
        params,
    ).to_pandas()


def translate(sql: LakehouseSQL, flow: str, topic: str, partition: int, offset: int) -> int | None:
    """Where a group that committed ``offset`` on the source resumes on the target (None: no copies)."""
    return sql.query("SELECT translate_offset(?, ?, ?, ?)", [flow, topic, partition, offset]).rows[0][0]


def last_copied(sql: LakehouseSQL, flow: str, topic: str, partition: int) -> int | None:
    """The last source offset copied in the partition's current life (None: nothing of it copied yet)."""
    found = sql.query("SELECT max(upstream_end) FROM current_offset_mapping(?, ?, ?)", [flow, topic, partition])
    value = found.rows[0][0]
    return int(value) if value is not None else None


@dataclass(frozen=True)
class ReverseTranslation:
    upstream: int  # where a consumer at the target offset resumes on the source
    method: str  # exact (the offset is a copy of ``upstream``), after_last_copy or before_first_copy
    copies: int  # how many copies of ``upstream`` the mapping knows (> 1 after a replay; 0 if not a copy)


def reverse_translate(
    sql: LakehouseSQL, flow: str, topic: str, partition: int, target_offset: int
) -> ReverseTranslation | None:
    """The source position of a target offset, by the client core's rule
    (``replicator.client.mapping.reverse_translate``); None when the partition has no copies.

    Only two segments decide it, so only they are read: the last one starting at or before the
    offset (it holds the offset, or is the last copy before it) and the one with the first source
    record (for an offset before every copy). The partition's current life only, as the client core
    reads it: a copy of a re-created topic's old life names no record of the topic there is now."""
    key = "current_offset_mapping(?, ?, ?)"
    rows = sql.query(
        f"(SELECT downstream_start, upstream_start, upstream_end, downstream_end FROM {key} "
        f"WHERE downstream_start <= ? ORDER BY downstream_start DESC LIMIT 1) UNION ALL "
        f"(SELECT downstream_start, upstream_start, upstream_end, downstream_end FROM {key} "
        f"ORDER BY upstream_start, downstream_start DESC LIMIT 1)",
        [flow, topic, partition, target_offset, flow, topic, partition],
    ).rows
    found = reverse_translate_segments([Segment(*(int(v) for v in row)) for row in rows], target_offset)
    if found is None:
        return None
    copies = 0
    if found.method == TranslationMethod.EXACT:
        copies = sql.query(
            f"SELECT count(*) FROM {key} WHERE upstream_start <= ? AND ? <= upstream_end",
            [flow, topic, partition, found.upstream, found.upstream],
        ).rows[0][0]
    return ReverseTranslation(found.upstream, str(found.method), int(copies))


def groups(sql: LakehouseSQL, flow: str) -> pd.DataFrame:
    """Per group and partition: committed, translated (checkpoint) and exact offsets, and the failover cost now."""
    if not has(sql, "group_offsets"):
        return pd.DataFrame()
    cost = (
        "r.records_unreplicated, r.records_lost, r.records_reread, r.records_duplicated, r.records_lost_total"
        if has(sql, "rpo_groups")
        else "NULL AS records_unreplicated, NULL AS records_lost, NULL AS records_reread, "
        "NULL AS records_duplicated, NULL AS records_lost_total"
    )
    join = 'LEFT JOIN rpo_groups r USING (flow, "group", source_topic, partition)' if has(sql, "rpo_groups") else ""
    return sql.arrow(
        f'SELECT g."group", g.source_topic, g.partition, g.committed_offset, g.translated_offset, g.exact_offset, '
        f"g.method, g.translation_error, g.as_of_ms, {cost} "
        f'FROM group_offsets g {join} WHERE g.flow = ? ORDER BY g."group", g.source_topic, g.partition',
        [flow],
    ).to_pandas()


def divergence(sql: LakehouseSQL) -> pd.DataFrame:
    """Every divergence row (all flows); the page filters it."""
    return frame(
        sql,
        "divergence",
        "SELECT flow, kind, source_topic, target_topic, item, partition, window_start, window_end, "
        "source_value, target_value, expected, exclusion_reason, observed_at_ms "
        "FROM divergence ORDER BY flow, kind, source_topic, item, partition, window_start",
    )


def rpo_now(sql: LakehouseSQL, flow: str) -> pd.DataFrame:
    """Each partition's latest RPO observation (gold ``rpo``); empty before the first watermark."""
    return frame(
        sql,
        "rpo",
        "SELECT source_topic, partition, records_unreplicated, records_expired_unreplicated, bytes_unreplicated, "
        "seconds_unreplicated, read_position, last_replicated_offset, log_end_offset, observed_at_ms FROM rpo_now(?)",
        [flow],
    )


def failover_now(sql: LakehouseSQL, flow: str) -> pd.DataFrame:
    """Per group and partition: what a failover now loses and re-reads (gold ``rpo_groups``)."""
    return frame(
        sql,
        "rpo_groups",
        'SELECT "group", source_topic, partition, committed_offset, resume_offset, method, exact_offset, '
        "records_unreplicated, records_lost, records_lost_total, records_reread, records_duplicated, as_of_ms "
        "FROM failover_now(?)",
        [flow],
    )


def failover_plan(sql: LakehouseSQL, flow: str) -> pd.DataFrame:
    """``mirrorlake failover plan``'s figures: per group and partition, the exact target offset and its cost."""
    if not has(sql, "rpo", "rpo_groups"):
        return pd.DataFrame()
    return sql.arrow("SELECT * FROM failover_plan(?)", [flow]).to_pandas()


def consistent_cut(sql: LakehouseSQL, flow: str) -> pd.DataFrame:
    """One row: the latest time up to which every partition of ``flow`` was replicated (``cut_ms``, null: unknown)."""
    return frame(sql, "rpo", "SELECT cut_ms, partitions, records_unreplicated FROM consistent_cut(?)", [flow])


def failovers_applied(sql: LakehouseSQL, flow: str) -> pd.DataFrame:
    """Every failover of ``flow`` applied so far, one row per failover (gold ``failovers``), newest first."""
    return frame(
        sql,
        "failovers",
        "SELECT failover_event_id, any_value(applied_at_ms) AS applied_at_ms, any_value(mode) AS mode, "
        'count(DISTINCT "group") AS groups, sum(records_lost) AS records_lost, '
        "sum(records_reread) AS records_reread, any_value(consistent_cut_ms) AS consistent_cut_ms, "
        "sum(outcome_records_reread) AS outcome_records_reread, "
        "string_agg(DISTINCT outcome, ', ' ORDER BY outcome) AS outcome, "
        'any_value("user") AS "user" FROM failovers WHERE flow = ? '
        "GROUP BY failover_event_id ORDER BY applied_at_ms DESC",
        [flow],
    )


def failbacks_applied(sql: LakehouseSQL, flow: str) -> pd.DataFrame:
    """Every failback step of ``flow`` applied so far (gold ``failbacks``), newest first."""
    return frame(
        sql,
        "failbacks",
        'SELECT applied_at_ms, action, records, ranges, bytes, groups, offsets_written, "user" '
        "FROM failbacks WHERE flow = ? ORDER BY applied_at_ms DESC",
        [flow],
    )
