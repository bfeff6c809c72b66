"""``divergence`` in DuckDB for the touched (flow, source topic) keys: the twin of ``lakehouse.tables.divergence``.

DuckDB picks the latest config snapshots, audit windows and target watermarks of the touched keys;
the rows are then built in Python from those few (a topic's snapshot pair, the audit windows that
differ, a partition's latest target watermark), by the rules the Spark module states. Spark's
details are kept: ``format_string`` prints a null as ``null``, a duplicate ACL keeps one row, and an
ACL comparison with a missing list is not true.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from lakehouse.duck.engine import DuckInputs, DuckTail, Twin, as_segments, keys_filter
from lakehouse.tables.divergence import (
    COLUMNS,
    KEY,
    LOST_VALUE,
    RECOPY_VALUE,
    RECREATED_VALUE,
    REMOTE_RECREATED_VALUE,
    SPEC,
    exclusions,
)
from lakehouse.tables.offset_mapping import MAPPING_KEY
from replicator.client.failover_cost import deleted_on_target
from replicator.config.patterns import compile_pattern

__all__ = ["TWIN"]

_EXTRA_REASON = "not copied from the source (MM2's rules never delete target ACLs)"


def _latest(table: str, by: str, where: str, order: str = "emitted_at_ms") -> str:
    return (
        f"SELECT * FROM {table} WHERE {where} "
        f"QUALIFY row_number() OVER (PARTITION BY {by} ORDER BY {order} DESC, event_id DESC) = 1"
    )


def _tail(inputs: DuckInputs) -> DuckTail:
    con = inputs.con
    keys = inputs.touched({event_type: KEY for event_type in SPEC.sources})
    where = keys_filter(keys)
    rows: list[dict[str, Any]] = []
    snapshots: list[dict[str, Any]] = []
    if inputs.versions.get("config_snapshot") is not None:
        table = inputs.silver("config_snapshot")
        snapshots = con.sql(_latest(table, "flow, cluster, topic, side", where)).to_arrow_table().to_pylist()
        rows += _topic_rows(snapshots, exclusions(inputs.config))
    if inputs.versions.get("audit_window") is not None:
        rows += _data_rows(con, inputs.silver("audit_window"), where, snapshots)
    if inputs.versions.get("watermark") is not None:
        rows += _deleted_rows(con, inputs, where)
    rows += _life_rows(con, inputs, where)
    return DuckTail(_table(rows), keys)


def _life_rows(con: Any, inputs: DuckInputs, where: str) -> list[dict[str, Any]]:
    """``source_topic_recreated`` and ``records_lost_before_copy`` rows, as the Spark module says."""
    out: list[dict[str, Any]] = []
    if inputs.versions.get("topic_recreated") is not None:
        found = con.sql(f"SELECT * FROM {inputs.silver('topic_recreated')} WHERE {where}")
        for r in found.to_arrow_table().to_pylist():
            if r["side"] == "target":
                ends = ", ".join(str(o) for o in r["log_end_offsets"])
                noted = {**r, "target_topic": r["topic"], "observed_at_ms": r["emitted_at_ms"]}
                previous = r["previous_topic_id"] if r["previous_topic_id"] is not None else "unknown"
                out.append(
                    _row(
                        noted,
                        "target_topic_recreated",
                        item=f"topic id {previous} -> {r['topic_id']}",
                        source_value=RECOPY_VALUE.get(r["policy"]),
                        target_value=REMOTE_RECREATED_VALUE.format(ends),
                    )
                )
                continue
            noted = {**r, "target_topic": None, "observed_at_ms": r["emitted_at_ms"]}
            out.append(
                _row(
                    noted,
                    "source_topic_recreated",
                    item=f"topic id {_fmt(r['previous_topic_id'])} -> {_fmt(r['topic_id'])}",
                    source_value=f"a new topic, log end offsets [{', '.join(str(o) for o in r['log_end_offsets'])}]",
                    target_value=RECREATED_VALUE,
                )
            )
    if inputs.versions.get("records_lost_before_copy") is not None:
        found = con.sql(f"SELECT * FROM {inputs.silver('records_lost_before_copy')} WHERE {where}")
        for r in found.to_arrow_table().to_pylist():
            noted = {**r, "target_topic": None, "observed_at_ms": r["emitted_at_ms"]}
            out.append(
                _row(
                    noted,
                    "records_lost_before_copy",
                    item=f"source offsets [{r['from_offset']}, {r['to_offset']})",
                    partition=r["partition"],
                    window_start=r["from_offset"],
                    window_end=r["to_offset"],
                    source_value=f"{r['records']} records",
                    target_value=LOST_VALUE,
                )
            )
    return out


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    types = {
        "partition": pa.int32(),
        "window_start": pa.int64(),
        "window_end": pa.int64(),
        "expected": pa.bool_(),
        "observed_at_ms": pa.int64(),
    }
    return pa.table({c: pa.array([r.get(c) for r in rows], types.get(c, pa.string())) for c in COLUMNS})


def _row(pair: Mapping[str, Any], kind: str, **values: Any) -> dict[str, Any]:
    base = {k: pair[k] for k in ("flow", "source_topic", "target_topic", "observed_at_ms")}
    return {**base, "kind": kind, "expected": False, **values}


def _greatest(*values: int | None) -> int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _topic_rows(snapshots: list[dict[str, Any]], exclusions: Mapping[str, Mapping[str, str]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    sources = [s for s in snapshots if s["side"] == "source"]
    targets = [s for s in snapshots if s["side"] == "target"]
    for s in sources:
        for t in targets:
            if (s["flow"], s["source_topic"]) != (t["flow"], t["source_topic"]):
                continue
            pair = {
                "flow": s["flow"],
                "source_topic": s["source_topic"],
                "target_topic": t["topic"],
                "observed_at_ms": _greatest(s["emitted_at_ms"], t["emitted_at_ms"]),
            }
            out += _pair_rows(pair, s, t, exclusions)
    return out


def _pair_rows(
    pair: dict[str, Any], s: Mapping[str, Any], t: Mapping[str, Any], exclusions: Mapping[str, Mapping[str, str]]
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if s["exists"] is not None and t["exists"] is not None and s["exists"] != t["exists"]:
        kind = "missing_target_topic" if s["exists"] else "missing_source_topic"
        out.append(_row(pair, kind, item=pair["target_topic"] if s["exists"] else pair["source_topic"]))
    if not (s["exists"] and t["exists"]):
        return out
    if s["partitions"] is not None and t["partitions"] is not None and s["partitions"] != t["partitions"]:
        out.append(_row(pair, "partition_count", source_value=str(s["partitions"]), target_value=str(t["partitions"])))
    s_cfg, t_cfg = _as_dict(s["configs"]), _as_dict(t["configs"])
    if s["configs"] is not None and t["configs"] is not None:
        patterns = exclusions.get(pair["flow"], exclusions["*"])
        for key in dict.fromkeys([*s_cfg, *t_cfg]):
            sv, tv = s_cfg.get(key), t_cfg.get(key)
            if sv == tv:
                continue
            reason = _first_match(key, patterns)
            out.append(
                _row(
                    pair,
                    "config",
                    item=key,
                    source_value=sv,
                    target_value=tv,
                    expected=reason is not None,
                    exclusion_reason=reason,
                )
            )
    return out + _acl_rows(pair, s["acls"], t["acls"])


def _as_dict(value: Any) -> dict[str, Any]:
    """An Arrow map as it comes to Python (a list of (key, value) pairs) as a dict."""
    return dict(value) if value is not None else {}


def _first_match(key: str, patterns: Mapping[str, str]) -> str | None:
    """The reason of the last listed pattern ``key`` matches whole (as ``.spark._first_match``)."""
    reason = None
    for pattern, why in patterns.items():
        if compile_pattern(pattern).fullmatch(key):
            reason = why
    return reason


def _expected_acl(acl: str, target_topic: str | None) -> str | None:
    """principal|host|operation|permission|pattern_type|resource_name as MM2 copies it, or null."""
    parts = acl.split("|")
    part = [parts[i] if i < len(parts) else None for i in range(5)]
    op = part[2].upper() if part[2] is not None else None
    if part[3] is None or part[3].upper() != "ALLOW" or op is None or op == "WRITE":
        return None
    copied = [part[0], part[1], "READ" if op == "ALL" else part[2], part[3], part[4], target_topic]
    return "|".join(p for p in copied if p is not None)  # concat_ws leaves nulls out


def _acl_rows(pair: dict[str, Any], s_acls: list[str] | None, t_acls: list[str] | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    wanted: dict[str, str] = {}
    for acl in s_acls or ():
        want = _expected_acl(acl, pair["target_topic"])
        if want is not None:
            wanted.setdefault(want, acl)
    if t_acls is not None:
        held = set(t_acls)
        for want, acl in wanted.items():
            if want not in held:
                out.append(_row(pair, "acl_missing_on_target", item=want, source_value=acl))
    for acl in dict.fromkeys(t_acls or ()):
        if acl not in wanted:
            out.append(
                _row(
                    pair,
                    "acl_extra_on_target",
                    item=acl,
                    target_value=acl,
                    expected=True,
                    exclusion_reason=_EXTRA_REASON,
                )
            )
    return out


def _fmt(value: Any) -> str:
    return "null" if value is None else str(value)


def _describe(pair: Mapping[str, Any], side: str) -> str:
    count, checksum, extra = (_fmt(pair[f"{side}_{c}"]) for c in ("count", "sum", "extra"))
    return f"count={count} checksum={checksum} extra_copies={extra}"


def _data_rows(con: Any, audits: str, where: str, snapshots: list[dict[str, Any]]) -> list[dict[str, Any]]:
    window = "flow, source_topic, partition, window_start"
    last = _latest(audits, f"{window}, side", where)
    pairs = con.sql(
        f"""WITH last AS ({last})
        SELECT s.flow, s.source_topic, s.partition, s.window_start, s.window_end, t.target_topic,
               s.record_count AS s_count, s.checksum AS s_sum, s.extra_copies AS s_extra,
               t.record_count AS t_count, t.checksum AS t_sum, t.extra_copies AS t_extra,
               greatest(s.emitted_at_ms, t.emitted_at_ms) AS observed_at_ms
        FROM (SELECT * FROM last WHERE side = 'source') s JOIN (SELECT * FROM last WHERE side = 'target') t
          USING ({window})
        WHERE s.record_count <> t.record_count OR s.checksum <> t.checksum"""
    ).to_arrow_table()
    compacted: dict[tuple[str, str], bool] = {}
    for snap in snapshots:  # the latest target snapshot per (flow, cluster, topic)
        if snap["side"] == "target":
            policy = _as_dict(snap["configs"]).get("cleanup.policy") or ""
            key = (snap["flow"], snap["source_topic"])
            compacted[key] = compacted.get(key, False) or "compact" in policy
    out = []
    for p in pairs.to_pylist():
        by_cleaner = compacted.get((p["flow"], p["source_topic"]), False) and (
            p["t_count"] is not None and p["s_count"] is not None and p["t_count"] < p["s_count"]
        )
        out.append(
            _row(
                p,
                "target_records_compacted" if by_cleaner else "data",
                item=f"offsets [{_fmt(p['window_start'])}, {_fmt(p['window_end'])})",
                partition=p["partition"],
                window_start=p["window_start"],
                window_end=p["window_end"],
                source_value=_describe(p, "s"),
                target_value=_describe(p, "t"),
            )
        )
    return out


def _deleted_rows(con: Any, inputs: DuckInputs, where: str) -> list[dict[str, Any]]:
    key = ", ".join(MAPPING_KEY)
    marks = con.sql(
        f"""WITH mark AS ({_latest(inputs.silver("watermark"), key, f"side = 'target' AND {where}", "observed_at_ms")}),
        seg AS ({inputs.segments(where)})
        SELECT m.flow, m.source_topic, m.partition, m.topic AS target_topic, m.observed_at_ms, m.log_start_offset,
               CASE WHEN m.log_start_offset > 0 AND g.first_copy < m.log_start_offset THEN g.segs END AS segs
        FROM mark m JOIN seg g USING ({key})"""
    ).to_arrow_table()
    out = []
    for m in marks.to_pylist():
        if m["segs"] is None:
            continue  # nothing below the log start
        gone = deleted_on_target(as_segments(m["segs"]), m["log_start_offset"])
        if gone.records <= 0:
            continue
        out.append(
            _row(
                m,
                "target_records_deleted",
                item=f"target offsets [{_fmt(gone.downstream_first)}, {m['log_start_offset']})",
                partition=m["partition"],
                window_start=gone.upstream_first,
                window_end=None if gone.upstream_last is None else gone.upstream_last + 1,
                source_value=f"source offsets [{_fmt(gone.upstream_first)}, {_fmt(gone.upstream_last)}]",
                target_value=f"{gone.records} records deleted from the target by retention/deletion",
            )
        )
    return out


TWIN = Twin(SPEC, tail=_tail)
