"""A partition's lives (a source or remote topic deleted and created again) in SQL (DuckDB): the twin
of ``current_life``/``said_lives`` in ``lakehouse.tables.offset_mapping.spark`` and of
``replicator.client.mapping_index``'s election.

Gold ``offset_mapping`` keeps every life's segments, each row naming its ``source_topic_id`` and
``target_topic_id``; what translates or counts copies reads the current life only, so an offset is
never mapped through another life's copies.
"""

from __future__ import annotations

from lakehouse.tables.offset_mapping import MAPPING_KEY

__all__ = ["said_lives_sql", "current_life_sql", "EACH_PARTITION_SQL"]

_KEY = ", ".join(MAPPING_KEY)
# a ``topic_recreated`` row's partitions, one row each (Spark: ``offset_mapping.spark._each_partition``)
EACH_PARTITION_SQL = "CAST(unnest(range(greatest(partitions, 1))) AS INTEGER) AS partition"


def said_lives_sql(recreated: str) -> str:
    """SQL: the lives silver ``topic_recreated`` (a table or view name, with a condition if need be)
    starts, one row per partition: (mapping key, ``side``, ``topic_id``, ``said_ms``: its earliest
    saying). A source-side row names the source topic's new id, a target-side row the remote topic's."""
    return (
        "SELECT flow, source_topic, partition, side, topic_id, min(said_ms) AS said_ms FROM ("
        f"SELECT flow, source_topic, side, {EACH_PARTITION_SQL}, "
        f"topic_id, emitted_at_ms AS said_ms FROM {recreated}) GROUP BY ALL"
    )


def _first_id(column: str, by_partition: str) -> str:
    """SQL: the partition's first ``column`` id (by its segment's first sync)."""
    return (
        f"struct_extract(min(CASE WHEN {column} IS NOT NULL "
        f"THEN struct_pack(t := first_synced_ms, id := {column}) END) OVER ({by_partition}), 'id')"
    )


def current_life_sql(mapping: str, said: str | None = None) -> str:
    """SQL: the rows of ``mapping`` (a query with gold ``offset_mapping``'s columns) in each partition's
    current life, as ``MappingIndex`` elects it. A life is a pair (source topic id, remote topic id);
    it starts at its earliest sync, or where ``said`` (``said_lives_sql``) says it earlier: a source
    id said starts the first life with that source id, a remote id said the first with that remote
    id. The one that started last is current. A row with no source id belongs to the first source
    id; one with no remote id to the first remote id, unless a re-creation said that id (then it
    is a life of its own, older: copies from before the remote ids were stamped). A life said but
    not copied yet keeps no row."""
    by_partition = f"PARTITION BY {_KEY}"
    first_s, first_t = (_first_id(c, by_partition) for c in ("source_topic_id", "target_topic_id"))
    # joins, not correlated subqueries: inside a macro called per row (``translate_offset`` over a
    # column) DuckDB 1.4 failed to bind those ("inequal types")
    said_cte, said_first, said_join = "", "false", ""
    if said is not None:
        on_f = " AND ".join(f"x.{c} = f.{c}" for c in MAPPING_KEY)
        said_cte = f" said AS ({said}),"
        said_first = "x.topic_id IS NOT NULL"
        said_join = f"LEFT JOIN said x ON {on_f} AND x.side = 'target' AND x.topic_id = f._first_t"
    lived = f"""
        WITH m AS ({mapping}),{said_cte}
        f AS (SELECT *, {first_s} AS _first_s, {first_t} AS _first_t FROM m),
        l AS (SELECT f.* EXCLUDE (_first_s, _first_t), coalesce(f.source_topic_id, f._first_s) AS _life_s,
                     CASE WHEN f.target_topic_id IS NOT NULL THEN f.target_topic_id
                          WHEN {said_first} THEN NULL ELSE f._first_t END AS _life_t
              FROM f {said_join}),
        s AS (SELECT *, min(first_synced_ms) OVER ({by_partition}, _life_s, _life_t) AS _start FROM l)"""
    if said is None:
        return (
            f"{lived} SELECT * EXCLUDE (_life_s, _life_t, _start) FROM s "
            f"QUALIFY _start >= max(_start) OVER ({by_partition})"
        )
    on = " AND ".join(f"{{a}}.{c} = s.{c}" for c in MAPPING_KEY)
    return f"""{lived},
        firsts AS (
            SELECT *, min(_start) OVER ({by_partition}, _life_s) AS _first_s_start,
                      min(_start) OVER ({by_partition}, _life_t) AS _first_t_start FROM s
        ),
        newest AS (SELECT {_KEY}, max(said_ms) AS said_ms FROM said GROUP BY ALL),
        started AS (
            SELECT s.*, least(s._start, CASE WHEN s._start = s._first_s_start THEN ds.said_ms END,
                              CASE WHEN s._start = s._first_t_start THEN dt.said_ms END) AS _started,
                   n.said_ms AS _said_newest
            FROM firsts s
            LEFT JOIN said ds ON {on.format(a="ds")} AND ds.side = 'source' AND ds.topic_id = s._life_s
            LEFT JOIN said dt ON {on.format(a="dt")} AND dt.side = 'target' AND dt.topic_id = s._life_t
            LEFT JOIN newest n ON {on.format(a="n")}
        )
        SELECT * EXCLUDE (_life_s, _life_t, _start, _first_s_start, _first_t_start, _started, _said_newest)
        FROM started
        QUALIFY _started >= greatest(max(_started) OVER ({by_partition}), _said_newest)"""
