"""``group_offsets``' tail in DuckDB: the twin of ``lakehouse.tables.group_offsets.spark._tail``.

A touched partition's rows come from the rows the table holds and the new checkpoints, never
silver: a row keeps every field of its group's latest checkpoint, so the latest of (the row, the
new checkpoints) is the latest of the whole history. The translation is redone through the mapping
as this build left it (the twin of ``lakehouse.translate.translate_offsets``).
"""

from __future__ import annotations

from lakehouse.duck.engine import DuckInputs, DuckTail, Twin, keys_filter
from lakehouse.tables.group_offsets import FROM_CHECKPOINT, GROUP_KEY, SPEC
from lakehouse.tables.offset_mapping import MAPPING_KEY
from replicator.client.mapping import TranslationMethod

__all__ = ["TWIN", "translated"]


def _q(column: str) -> str:
    return f'"{column}"'


def translated(queries: str, mapping: str, id_cols: tuple[str, ...], offset_col: str) -> str:
    """SQL: the rows of ``queries`` plus ``exact_offset`` and ``exact_method``, ``offset_col``
    translated through the segments of ``mapping`` (``lakehouse.translate.translate_offsets``)."""
    ids = ", ".join(f"q.{_q(c)}" for c in id_cols)
    c = f"q.{_q(offset_col)}"
    on = " AND ".join(f"s.{_q(k)} = q.{_q(k)}" for k in MAPPING_KEY)
    same = " AND ".join(f"f.{_q(k)} = q.{_q(k)}" for k in id_cols)
    return f"""
        WITH found AS (
            SELECT {ids},
                   arg_max({c} + s.delta, s.downstream_start)
                       FILTER (WHERE s.upstream_start <= {c} AND {c} <= s.upstream_end) AS covering,
                   arg_max(s.downstream_end + 1, struct_pack(e := s.upstream_end, d := s.downstream_end))
                       FILTER (WHERE s.upstream_end < {c}) AS before_,
                   arg_min(s.downstream_start, struct_pack(s := s.upstream_start, d := -s.downstream_start))
                       FILTER (WHERE s.upstream_start > {c}) AS after_
            FROM {queries} q LEFT JOIN {mapping} s ON {on}
            GROUP BY {ids}
        )
        SELECT q.*, coalesce(f.covering, f.before_, f.after_) AS exact_offset,
               CASE WHEN f.covering IS NOT NULL THEN '{TranslationMethod.EXACT.value}'
                    WHEN f.before_ IS NOT NULL THEN '{TranslationMethod.AFTER_LAST_COPY.value}'
                    WHEN f.after_ IS NOT NULL THEN '{TranslationMethod.BEFORE_FIRST_COPY.value}' END AS exact_method
        FROM {queries} q LEFT JOIN found f ON {same}
    """


def _tail(inputs: DuckInputs) -> DuckTail:
    con = inputs.con
    keys = inputs.touched({"checkpoint": MAPPING_KEY, "offset_sync": MAPPING_KEY, "topic_recreated": MAPPING_KEY})
    where = keys_filter(keys)
    fields = ", ".join(_q(f) for f, _ in FROM_CHECKPOINT)
    held = ", ".join(f"{_q(column)} AS {_q(f)}" for f, column in FROM_CHECKPOINT)
    candidates = f"SELECT {held} FROM {inputs.gold('group_offsets')} WHERE {where}"
    if "checkpoint" in inputs.changes:
        candidates += f" UNION ALL SELECT {fields} FROM {inputs.new('checkpoint')} WHERE {where}"
    latest = ", ".join(f"{_q(f)} AS {_q(column)}" for f, column in FROM_CHECKPOINT)
    by_group = ", ".join(_q(c) for c in GROUP_KEY)
    con.execute(
        f"""CREATE TEMP TABLE last AS SELECT {latest} FROM ({candidates})
            QUALIFY row_number() OVER (PARTITION BY {by_group} ORDER BY emitted_at_ms DESC, event_id DESC) = 1"""
    )
    con.execute(f"CREATE TEMP TABLE segments AS {inputs.mapping(where)}")
    rows = con.sql(
        f"SELECT *, translated_offset - exact_offset AS translation_error "
        f"FROM ({translated('last', 'segments', GROUP_KEY, 'committed_offset')})"
    ).to_arrow_table()
    return DuckTail(rows, keys)


TWIN = Twin(SPEC, tail=_tail)
