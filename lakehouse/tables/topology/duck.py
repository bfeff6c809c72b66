"""``topology`` in DuckDB for the touched keys: the twin of ``.spark``. Every (origin, cluster) pair of an
origin with new heartbeats is recomputed from gold ``heartbeat_latency`` as this build left it.
"""

from __future__ import annotations

from lakehouse.duck.engine import DuckInputs, DuckTail, Twin, in_keys
from lakehouse.tables.heartbeat_latency.duck import observed_keys
from lakehouse.tables.topology import KEY, ORIGIN, SPEC

__all__ = ["TWIN"]


def _topology(inputs: DuckInputs) -> DuckTail:
    con = inputs.con
    keys = observed_keys(inputs, "origin_cluster")
    by = ", ".join(KEY)
    rows = con.sql(
        f"""
        WITH l AS (SELECT * FROM {inputs.gold("heartbeat_latency")} WHERE {in_keys("touched", ORIGIN)}),
        stats AS (SELECT {by}, count(*) AS observations, count(DISTINCT path) AS paths FROM l GROUP BY {by}),
        last AS (
            SELECT {by}, hops, path, received_at_ms AS last_seen_ms, latency_ms AS latest_latency_ms,
                   hop_latency_ms AS latest_hop_latency_ms
            FROM l QUALIFY row_number() OVER (PARTITION BY {by} ORDER BY received_at_ms DESC, event_id DESC) = 1
        )
        SELECT * FROM last JOIN stats USING ({by})
        """
    ).to_arrow_table()
    return DuckTail(rows, keys)


TWIN = Twin(SPEC, tail=_topology)
