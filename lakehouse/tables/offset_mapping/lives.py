"""A re-created source topic's lives in SQL (DuckDB): the twin of ``current_life``/``said_lives`` in
``lakehouse.tables.offset_mapping.spark`` and of ``replicator.client.mapping_index``'s election.

Gold ``offset_mapping`` keeps every life's segments, each row naming its ``source_topic_id``;
what translates or counts copies reads the current life only, so an offset of the new topic is
never mapped through the old topic's copies.
"""

from __future__ import annotations

from lakehouse.tables.offset_mapping import MAPPING_KEY

__all__ = ["said_lives_sql", "current_life_sql", "EACH_PARTITION_SQL"]

_KEY = ", ".join(MAPPING_KEY)
# a ``topic_recreated`` row's partitions, one row each (Spark: ``offset_mapping.spark._each_partition``)
EACH_PARTITION_SQL = "CAST(unnest(range(greatest(partitions, 1))) AS INTEGER) AS partition"


def said_lives_sql(recreated: str) -> str:
    """SQL: the lives silver ``topic_recreated`` (a table or view name, with a condition if need be)
    starts, one row per partition of the new topic: (mapping key, ``topic_id``, ``said_ms``: its
    earliest saying)."""
    return (
        "SELECT flow, source_topic, partition, topic_id, min(said_ms) AS said_ms FROM ("
        f"SELECT flow, source_topic, side, {EACH_PARTITION_SQL}, "
        f"topic_id, emitted_at_ms AS said_ms FROM {recreated}) WHERE side = 'source' GROUP BY ALL"
    )


def current_life_sql(mapping: str, said: str | None = None) -> str:
    """SQL: the rows of ``mapping`` (a query with gold ``offset_mapping``'s columns) in each partition's
    current life: a life starts at its earliest sync, or where ``said`` (``said_lives_sql``) says it
    earlier; the one that started last is current; rows with no id belong to the first id's life; a
    life said but not copied yet keeps no row."""
    by_partition = f"PARTITION BY {_KEY}"
    first_id = (
        "struct_extract(min(CASE WHEN source_topic_id IS NOT NULL "
        f"THEN struct_pack(t := first_synced_ms, id := source_topic_id) END) OVER ({by_partition}), 'id')"
    )
    lived = f"""
        WITH m AS ({mapping}),
        l AS (SELECT *, coalesce(source_topic_id, {first_id}) AS _life FROM m),
        s AS (SELECT *, min(first_synced_ms) OVER ({by_partition}, _life) AS _start FROM l)"""
    if said is None:
        return f"{lived} SELECT * EXCLUDE (_life, _start) FROM s QUALIFY _start >= max(_start) OVER ({by_partition})"
    on = " AND ".join(f"d.{c} = s.{c}" for c in MAPPING_KEY)
    return f"""{lived},
        said AS ({said}),
        newest AS (SELECT {_KEY}, max(said_ms) AS said_ms FROM said GROUP BY ALL),
        started AS (
            SELECT s.*, least(s._start, d.said_ms) AS _started, n.said_ms AS _said_newest
            FROM s LEFT JOIN said d ON {on} AND d.topic_id = s._life
            LEFT JOIN newest n ON {on.replace("d.", "n.")}
        )
        SELECT * EXCLUDE (_life, _start, _started, _said_newest) FROM started
        QUALIFY _started >= greatest(max(_started) OVER ({by_partition}), _said_newest)"""
