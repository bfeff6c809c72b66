"""``failbacks`` in DuckDB for the touched keys: the twin of ``.spark``. A flow's failback steps are
recomputed whole.
"""

from __future__ import annotations

from lakehouse.duck.delta import table_schema
from lakehouse.duck.engine import DuckInputs, DuckTail, Twin, in_keys
from lakehouse.tables.failbacks import KEY, SPEC

__all__ = ["TWIN"]


def _failbacks(inputs: DuckInputs) -> DuckTail:
    con = inputs.con
    keys = con.sql(f"SELECT DISTINCT flow FROM {inputs.new('failback')}").to_arrow_table()
    if not keys.num_rows:
        return DuckTail(table_schema(inputs.paths.gold("failbacks")).empty_table(), keys)
    con.register("touched", keys)
    rows = con.sql(
        f"""
        SELECT flow, event_id AS failback_event_id, emitted_at_ms AS applied_at_ms, action, source_cluster,
               target_cluster, records::BIGINT AS records, len(ranges) AS ranges,
               coalesce(list_reduce(list_transform(ranges, r -> r.bytes::BIGINT), (a, b) -> a + b, 0::BIGINT), 0)
                   AS bytes,
               array_to_string(groups, ',') AS groups, len(offsets) AS offsets_written, "user", host
        FROM {inputs.silver("failback")} WHERE {in_keys("touched", KEY)}
        """
    ).to_arrow_table()
    return DuckTail(rows, keys)


TWIN = Twin(SPEC, tail=_failbacks, needs=("failback",))
