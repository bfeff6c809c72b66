"""``rpo_groups``' tail in DuckDB: the twin of ``lakehouse.tables.rpo_groups.spark._tail``.

DuckDB gathers each touched partition's groups, segments of the current life and latest
watermarks; the largest offset copied is the segments' largest upstream end. The per-row rules
then run in Python, the reference the Spark expressions follow (``replicator.client.failover_cost``):
a touched partition has a row per group, so these are few. Spark's null rules are kept:
``greatest`` skips nulls, a comparison with a null is not true.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from lakehouse.duck.engine import DuckInputs, DuckTail, Twin, as_segments, keys_filter
from lakehouse.sql_quote import duck_string
from lakehouse.tables.group_offsets import GROUP_KEY
from lakehouse.tables.offset_mapping import MAPPING_KEY
from lakehouse.tables.rpo_groups import SPEC
from replicator.client.failover_cost import DELETED_ON_TARGET, deleted_on_target, failover_cost
from replicator.client.mapping import Segment

__all__ = ["TWIN"]

_KEY = ", ".join(MAPPING_KEY)
_BY_KEY = " AND ".join(f"x.{k} = g.{k}" for k in MAPPING_KEY)


def _latest_mark(watermarks: str, side: str, where: str, columns: str) -> str:
    return (
        f"SELECT {_KEY}, {columns} FROM {watermarks} WHERE side = {duck_string(side)} AND {where} "
        f"QUALIFY row_number() OVER (PARTITION BY {_KEY} ORDER BY observed_at_ms DESC, event_id DESC) = 1"
    )


def _tail(inputs: DuckInputs) -> DuckTail:
    con = inputs.con
    keys = inputs.touched(
        {
            "checkpoint": MAPPING_KEY,
            "offset_sync": MAPPING_KEY,
            "watermark": MAPPING_KEY,
            "topic_recreated": MAPPING_KEY,
        }
    )
    con.register("touched", keys)
    where = keys_filter(keys)
    watermarks = inputs.silver("watermark") if inputs.versions.get("watermark") is not None else None
    source_mark = target_mark = None
    if watermarks is not None:
        source_mark = _latest_mark(
            watermarks,
            "source",
            where,
            "log_start_offset AS source_log_start_offset, log_end_offset AS source_log_end_offset, "
            "observed_at_ms AS watermark_observed_at_ms, read_position AS source_read_position, "
            "unreplicated_records AS source_unreplicated_records",
        )
        target_mark = _latest_mark(watermarks, "target", where, "log_start_offset AS target_log_start_offset")
    nulls = {
        "source": "NULL::BIGINT AS source_log_start_offset, NULL::BIGINT AS source_log_end_offset, "
        "NULL::BIGINT AS watermark_observed_at_ms, NULL::BIGINT AS source_read_position, "
        "NULL::BIGINT AS source_unreplicated_records",
        "target": "NULL::BIGINT AS target_log_start_offset",
    }
    segments = inputs.segments(where)
    group_cols = ", ".join(f'g."{c}"' for c in (*GROUP_KEY, "committed_offset", "translated_offset", "method"))
    base = con.sql(
        f"""
        WITH sm AS ({source_mark or f"SELECT {_KEY}, {nulls['source']} FROM touched WHERE false"}),
             tm AS ({target_mark or f"SELECT {_KEY}, {nulls['target']} FROM touched WHERE false"}),
             seg AS ({segments})
        SELECT {group_cols}, g.exact_offset, g.as_of_ms, seg.segs, seg.first_copy,
               sm.* EXCLUDE ({_KEY}), tm.* EXCLUDE ({_KEY})
        FROM (SELECT * FROM {inputs.gold("group_offsets")} WHERE {where}) g
        LEFT JOIN seg ON {_BY_KEY.replace("x.", "seg.")}
        LEFT JOIN sm ON {_BY_KEY.replace("x.", "sm.")}
        LEFT JOIN tm ON {_BY_KEY.replace("x.", "tm.")}
        """
    ).to_arrow_table()
    rows = [_row(r) for r in base.to_pylist()]
    return DuckTail(pa.Table.from_pylist(rows) if rows else _empty(inputs), keys)


def _empty(inputs: DuckInputs) -> pa.Table:
    from lakehouse.duck.delta import table_schema

    return table_schema(inputs.paths.gold("rpo_groups")).empty_table()


def _greatest(*values: int | None) -> int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _coalesce(*values: int | None) -> int | None:
    return next((v for v in values if v is not None), None)


def _lt(a: int | None, b: int | None) -> bool:
    return a is not None and b is not None and a < b


def _row(r: dict[str, Any]) -> dict[str, Any]:
    """One group's row from its joined inputs (the rules of ``lakehouse.tables.rpo_groups.spark.rpo_groups``)."""
    segments = as_segments(r["segs"])
    c = r["committed_offset"]
    log_start = r["target_log_start_offset"]

    def resumable(offset: int | None) -> int | None:
        return log_start if _lt(offset, log_start) else offset

    last = max((s.upstream_end for s in segments), default=None)
    read_position = r["source_read_position"]
    replicated_to = _coalesce(read_position, None if last is None else last + 1, c)
    next_needed = _greatest(c, replicated_to, r["source_log_start_offset"])
    end = r["source_log_end_offset"]
    bound = _greatest(0, None if end is None or next_needed is None else end - next_needed)
    measured = r["source_unreplicated_records"]
    exact_inside = measured is not None and c is not None and read_position is not None and c <= read_position
    unreplicated = measured if exact_inside else bound
    resume, exact = resumable(r["translated_offset"]), resumable(r["exact_offset"])
    near = _near(segments, c, resume, exact)
    at_resume = _cost(near, c, resume)
    at_exact = _cost(near, c, exact)
    deleted = _deleted(segments, r["first_copy"], log_start, c)
    lost = None if at_resume is None else at_resume[0]
    return {
        **{k: r[k] for k in GROUP_KEY},
        "committed_offset": c,
        "resume_offset": resume,
        "method": "log_start" if _lt(r["translated_offset"], log_start) else r["method"],
        "exact_offset": r["exact_offset"],
        "last_replicated_offset": last,
        "source_log_start_offset": r["source_log_start_offset"],
        "source_log_end_offset": end,
        "watermark_observed_at_ms": r["watermark_observed_at_ms"],
        "records_unreplicated": unreplicated,
        "records_lost": lost,
        "records_reread": None if at_resume is None else at_resume[1],
        "records_duplicated": None if at_resume is None else at_resume[2],
        "records_lost_at_exact": None if at_exact is None else at_exact[0],
        "records_reread_at_exact": None if at_exact is None else at_exact[1],
        "records_lost_total": (unreplicated or 0) + (lost or 0),
        "target_log_start_offset": log_start,
        "records_deleted_on_target": deleted,
        "lost_cause": DELETED_ON_TARGET
        if deleted is not None and deleted > 0 and lost is not None and lost > 0
        else None,
        "as_of_ms": _greatest(r["as_of_ms"], r["watermark_observed_at_ms"]),
    }


def _near(segments: Sequence[Segment], c: int | None, *resume_at: int | None) -> list[Segment]:
    """The segments a cost can count (``lakehouse.tables.rpo_groups.spark._near``): records at or after ``c`` or
    copies at or after the lowest resume offset; near the head a few of thousands."""
    starts = [t for t in resume_at if t is not None]
    if c is None or not starts:
        return list(segments)
    t = min(starts)
    return [s for s in segments if s.upstream_end >= c or s.downstream_end >= t]


def _cost(segments: Sequence[Segment], committed: int | None, resume_at: int | None) -> tuple[int, int, int] | None:
    if committed is None or resume_at is None:
        return None
    cost = failover_cost(segments, committed, resume_at)
    return cost.lost, cost.reread, cost.duplicated


def _deleted(
    segments: Sequence[Segment], first_copy: int | None, log_start: int | None, since: int | None
) -> int | None:
    """``lakehouse.target_deletions.deleted_copies``' records: null without a log start, 0 where no
    copy can lie below it."""
    if log_start is None:
        return None
    if not (log_start > 0 and first_copy is not None and first_copy < log_start):
        return 0
    return deleted_on_target(segments, log_start, 0 if since is None else since).records


TWIN = Twin(SPEC, tail=_tail, needs=("offset_sync",))  # the mapping is built from it
