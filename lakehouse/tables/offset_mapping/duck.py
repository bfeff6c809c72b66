"""``offset_mapping``'s tail in DuckDB: the twin of ``lakehouse.tables.offset_mapping.spark._tail``.

Same rule: a new point at (d0, u0) can change only the segment holding the last point before it
and what follows, so each touched partition is recomputed from the start of its last segment that
starts before its first new point (the whole partition when none does), from the silver syncs
whose points lie there. Points and segments follow ``lakehouse.tables.offset_mapping`` step by step; a
partition's names (clusters, target topic) are the least of its syncs' (one row in practice).
"""

from __future__ import annotations

from lakehouse.duck.engine import DuckInputs, DuckTail, Twin, keys_filter
from lakehouse.tables.offset_mapping import MAPPING_KEY, SPEC
from replicator.client.mapping import BOUNDARY, CONTINUES, SESSION_START
from replicator.events.model import SyncReason

__all__ = ["TWIN", "segments_sql"]

_KEY = ", ".join(MAPPING_KEY)
_COLUMNS = (
    f"{_KEY}, source_cluster, target_cluster, target_topic, emitted_at_ms, reason, upstream_offset, "
    "downstream_offset, previous_upstream_offset, previous_downstream_offset, source_topic_id, target_topic_id"
)
_HAS_PREV = "previous_upstream_offset IS NOT NULL AND previous_downstream_offset IS NOT NULL"


def _points(syncs: str) -> str:
    """SQL: each sync's point and its predecessor's (``lakehouse.tables.offset_mapping.spark._points`` before its
    grouping), with the sync's names and emission time."""
    adjacent = "upstream_offset - previous_upstream_offset = 1 AND downstream_offset - previous_downstream_offset = 1"
    own_start = (
        f"CASE WHEN {_HAS_PREV} THEN (CASE WHEN {adjacent} THEN {CONTINUES} ELSE {BOUNDARY} END) "
        f"WHEN reason = '{SyncReason.FIRST.value}' THEN {SESSION_START} ELSE {CONTINUES} END"
    )
    names = "source_cluster, target_cluster, target_topic, emitted_at_ms, source_topic_id, target_topic_id"
    return (
        f"SELECT {_KEY}, {names}, downstream_offset AS d, upstream_offset AS u, {own_start} AS start FROM {syncs} "
        f"UNION ALL SELECT {_KEY}, {names}, previous_downstream_offset, previous_upstream_offset, {CONTINUES} "
        f"FROM {syncs} WHERE {_HAS_PREV}"
    )


def segments_sql(syncs: str, scope: str) -> str:
    """SQL: the segments of ``syncs`` (a query with the sync columns it reads) from each scope
    partition's tail start on (``_tail_downstream_start``/``_tail_upstream_start`` of the view
    ``scope``; null: the whole partition), as ``lakehouse.tables.offset_mapping`` builds them."""
    return f"""
        WITH syncs AS ({syncs}),
        points AS (
            SELECT p.{_KEY.replace(", ", ", p.")}, p.d, p.u, max(p.start) AS start,
                   min(struct_pack(sc := p.source_cluster, tc := p.target_cluster, tt := p.target_topic)) AS nm,
                   min(p.emitted_at_ms) AS emitted_at_ms, max(p.source_topic_id) AS source_topic_id,
                   p.target_topic_id
            FROM ({_points("syncs")}) p
            JOIN {scope} s ON p.flow = s.flow AND p.source_topic = s.source_topic AND p.partition = s.partition
            WHERE s._tail_downstream_start IS NULL OR p.d > s._tail_downstream_start
               OR (p.d = s._tail_downstream_start AND p.u >= s._tail_upstream_start)
            GROUP BY ALL
        ),
        stepped AS (
            SELECT *, lag(u) OVER w AS prev_u, lag(d) OVER w AS prev_d, lag(source_topic_id) OVER w AS prev_id
            FROM points
            WINDOW w AS (PARTITION BY {_KEY}, target_topic_id ORDER BY d, u)
        ),
        flagged AS (
            SELECT *, sum(CASE WHEN prev_u IS NULL OR d - u <> prev_d - prev_u OR u <= prev_u
                                    OR source_topic_id <> prev_id
                                    OR start = {BOUNDARY} OR (start = {SESSION_START} AND u <> prev_u + 1)
                               THEN 1 ELSE 0 END)
                      OVER (PARTITION BY {_KEY}, target_topic_id ORDER BY d, u ROWS UNBOUNDED PRECEDING) AS segment
            FROM stepped
        ),
        segments AS (
            SELECT {_KEY}, target_topic_id, segment, min(nm) AS nm,
                   arg_min(u, d) AS upstream_start, arg_max(u, d) AS upstream_end,
                   min(d) AS downstream_start, max(d) AS downstream_end, count(*) AS points,
                   min(emitted_at_ms) AS first_synced_ms, max(emitted_at_ms) AS last_synced_ms,
                   max(source_topic_id) AS source_topic_id
            FROM flagged GROUP BY {_KEY}, target_topic_id, segment
        )
        SELECT flow, nm.sc AS source_cluster, nm.tc AS target_cluster, source_topic,
               nm.tt AS target_topic, partition, source_topic_id, target_topic_id, upstream_start, upstream_end,
               downstream_start, downstream_end, downstream_start - upstream_start AS delta,
               points, first_synced_ms, last_synced_ms
        FROM segments
        """


def _tail(inputs: DuckInputs) -> DuckTail:
    con = inputs.con
    new = inputs.new("offset_sync")
    mapping = inputs.gold("offset_mapping")
    first_new = (
        f"SELECT {_KEY}, arg_min(d, (d, u)) AS fd, arg_min(u, (d, u)) AS fu FROM ({_points(new)}) GROUP BY {_KEY}"
    )
    # a partition copied into several remote topic lives is recomputed whole (``spark._tail``)
    on = " AND ".join(f"m.{c} = k.{c}" for c in MAPPING_KEY)
    scope = con.sql(
        f"""
        WITH k AS ({first_new}),
        multi AS (
            SELECT {_KEY} FROM (
                SELECT {_KEY}, target_topic_id FROM {new} UNION ALL
                SELECT m.{_KEY.replace(", ", ", m.")}, m.target_topic_id FROM {mapping} m SEMI JOIN k ON {on}
            )
            GROUP BY ALL HAVING count(DISTINCT target_topic_id) > 1
        ),
        m AS (SELECT * FROM {mapping} k ANTI JOIN multi m ON {on})
        SELECT k.{_KEY.replace(", ", ", k.")},
               arg_max(m.downstream_start, (m.downstream_start, m.upstream_start)) AS _tail_downstream_start,
               arg_max(m.upstream_start, (m.downstream_start, m.upstream_start)) AS _tail_upstream_start
        FROM k LEFT JOIN m
          ON {on}
         AND (m.downstream_start < k.fd OR (m.downstream_start = k.fd AND m.upstream_start < k.fu))
        GROUP BY ALL
        """
    ).to_arrow_table()
    con.register("scope", scope)
    # a literal bound lets the scan skip the files of older syncs by their statistics
    lowest = con.sql(
        "SELECT CASE WHEN count(*) = count(_tail_downstream_start) THEN min(_tail_downstream_start) END FROM scope"
    ).fetchone()
    syncs = inputs.silver("offset_sync")
    where = keys_filter(scope.select(list(MAPPING_KEY)))
    if lowest is not None and lowest[0] is not None:
        where += f" AND (downstream_offset >= {int(lowest[0])} OR previous_downstream_offset >= {int(lowest[0])})"
    rows = con.sql(segments_sql(f"SELECT {_COLUMNS} FROM {syncs} WHERE {where}", "scope")).to_arrow_table()
    return DuckTail(rows, scope)


TWIN = Twin(SPEC, tail=_tail, needs=("offset_sync",))
