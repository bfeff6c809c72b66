"""Gold ``divergence``: where a flow's target differs from its source, one row per difference.

From the latest ``config_snapshot`` per (flow, cluster, topic, side), source and target paired on
(flow, source topic):

* ``missing_target_topic`` / ``missing_source_topic``: a side reports ``exists = false``;
* ``partition_count``: the partition counts differ;
* ``config``: an effective value (broker defaults included) differs; keys the flow never syncs
  (MM2's exclusion list, or the flow's ``config_properties_exclude``) are kept with
  ``expected = true`` and the ``exclusion_reason``, everything else is ``expected = false``;
* ``acl_missing_on_target`` / ``acl_extra_on_target``: the target's topic ACLs against the
  source's as MM2's rules copy them (ALLOW only, never WRITE, ALL becomes READ, renamed topic).

From the latest ``audit_window`` per side, joined on (flow, source topic, partition,
window_start) (both sides key windows by upstream offset): ``data`` rows where the record count
or the checksum differ; ``target_records_compacted`` where the target holds fewer records and its
topic is compacted (latest target ``config_snapshot``): the audit task reads a compacted target's
windows again after the cleaner ran (``replicator.tasks.audit``), and the copies it removed are
gone for any consumer of the target (a failover plan counts them as lost).

From the latest target ``watermark`` per partition and the mapping: ``target_records_deleted``
rows where replicated records lie, every copy of them, below the target's log start (retention,
``delete-records``): the audits compared them before they went and never see them again
(``lakehouse.target_deletions``). ``item`` names the target offsets that held them,
``window_start``/``window_end`` their source offsets ``[first, last + 1)``, ``target_value`` the count.

From the topics' lives: ``source_topic_recreated`` per re-creation of a source topic (``item`` the
topic ids, ``source_value`` the new topic's log end offsets when noticed): the target keeps the
old topic's copies before the new one's; ``records_lost_before_copy`` per range of source offsets
deleted before the flow copied them (``window_start``/``window_end``, ``source_value`` the count).
Neither names the remote topic: ``target_topic`` is null. ``target_topic_recreated`` per remote
topic deleted and created again on the target (``item`` its ids, ``unknown`` when only its log end
told; ``target_value`` its log end offsets when noticed; ``source_value`` whether the flow copied
the source topic again).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse.gold import GoldInputs, GoldTable, latest, touched_keys
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
from lakehouse.tables.offset_mapping.spark import current_mapping
from lakehouse.target_deletions import deleted_copies, segments_by_partition
from replicator.config import MirrorlakeConfig

__all__ = ["divergence", "TABLE"]


def _first_match(config_key: Column, patterns: Mapping[str, str]) -> Column:
    """The reason of the pattern ``config_key`` matches (the last listed wins), else null."""
    reason_of: Column = F.lit(None).cast("string")
    for pattern, reason in patterns.items():
        reason_of = F.when(config_key.rlike(f"^(?:{pattern})$"), F.lit(reason)).otherwise(reason_of)
    return reason_of


def _reason(config_key: Column, flow: Column, exclusions: Mapping[str, Mapping[str, str]]) -> Column:
    by_flow = _first_match(config_key, exclusions["*"])
    for name, patterns in exclusions.items():
        if name != "*":
            by_flow = F.when(flow == F.lit(name), _first_match(config_key, patterns)).otherwise(by_flow)
    return by_flow


def _row(df: DataFrame, kind: str | Column, **cols: Column) -> DataFrame:
    values = {
        "kind": F.lit(kind) if isinstance(kind, str) else kind,
        "item": F.lit(None).cast("string"),
        "partition": F.lit(None).cast("int"),
        "window_start": F.lit(None).cast("long"),
        "window_end": F.lit(None).cast("long"),
        "source_value": F.lit(None).cast("string"),
        "target_value": F.lit(None).cast("string"),
        "expected": F.lit(False),
        "exclusion_reason": F.lit(None).cast("string"),
        **cols,
    }
    return df.select(
        *[values[c].alias(c) if c in values else F.col(c) for c in COLUMNS]  # flow, topics, observed_at_ms
    )


def _topic_rows(snapshots: DataFrame, exclusions: Mapping[str, Mapping[str, str]]) -> DataFrame:
    last = latest(snapshots, ["flow", "cluster", "topic", "side"], ["emitted_at_ms"])
    src, tgt = (last.where(F.col("side") == side).alias(side[0]) for side in ("source", "target"))
    pair = src.join(tgt, ["flow", "source_topic"], "inner").select(
        "flow",
        "source_topic",
        F.col("t.topic").alias("target_topic"),
        F.col("s.exists").alias("s_exists"),
        F.col("t.exists").alias("t_exists"),
        F.col("s.partitions").alias("s_parts"),
        F.col("t.partitions").alias("t_parts"),
        F.col("s.configs").alias("s_cfg"),
        F.col("t.configs").alias("t_cfg"),
        F.col("s.config_sources").alias("s_src"),
        F.col("t.config_sources").alias("t_src"),
        F.col("s.acls").alias("s_acls"),
        F.col("t.acls").alias("t_acls"),
        F.greatest("s.emitted_at_ms", "t.emitted_at_ms").alias("observed_at_ms"),
    )
    both = F.col("s_exists") & F.col("t_exists")
    missing = _row(
        pair.where(F.col("s_exists") != F.col("t_exists")),
        F.when(F.col("s_exists"), F.lit("missing_target_topic")).otherwise(F.lit("missing_source_topic")),
        item=F.when(F.col("s_exists"), F.col("target_topic")).otherwise(F.col("source_topic")),
    )
    parts = _row(
        pair.where(both & (F.col("s_parts") != F.col("t_parts"))),
        "partition_count",
        source_value=F.col("s_parts").cast("string"),
        target_value=F.col("t_parts").cast("string"),
    )
    keyed = pair.where(both).select(
        "*", F.explode(F.array_union(F.map_keys("s_cfg"), F.map_keys("t_cfg"))).alias("_key")
    )
    sv, tv = F.col("s_cfg")[F.col("_key")], F.col("t_cfg")[F.col("_key")]
    reason = _reason(F.col("_key"), F.col("flow"), exclusions)
    configs = _row(
        keyed.where(~sv.eqNullSafe(tv)),
        "config",
        item=F.col("_key"),
        source_value=sv,
        target_value=tv,
        expected=reason.isNotNull(),
        exclusion_reason=reason,
    )
    return missing.unionByName(parts).unionByName(configs).unionByName(_acl_rows(pair.where(both)))


def _expected_acl(acl: Column, target_topic: Column) -> Column:
    """principal|host|operation|permission|pattern_type|resource_name as MM2 copies it, or null."""
    parts = F.split(acl, r"\|", -1)
    p = [F.get(parts, i) for i in range(5)]  # null past the end: a damaged ACL is never copied, never fails
    op = F.upper(p[2])
    copied = F.concat_ws("|", p[0], p[1], F.when(op == "ALL", F.lit("READ")).otherwise(p[2]), p[3], p[4], target_topic)
    return F.when((F.upper(p[3]) == "ALLOW") & (op != "WRITE"), copied)


def _acl_rows(pair: DataFrame) -> DataFrame:
    expected = pair.select(
        "flow",
        "source_topic",
        "target_topic",
        "observed_at_ms",
        "t_acls",
        F.explode("s_acls").alias("_acl"),
    ).select("*", _expected_acl(F.col("_acl"), F.col("target_topic")).alias("_want"))
    missing = _row(
        expected.where(F.col("_want").isNotNull() & ~F.array_contains("t_acls", F.col("_want"))).dropDuplicates(
            ["flow", "source_topic", "_want"]
        ),
        "acl_missing_on_target",
        item=F.col("_want"),
        source_value=F.col("_acl"),
    )
    wanted = expected.groupBy("flow", "source_topic").agg(F.collect_set("_want").alias("_wanted"))
    extra_src = pair.join(wanted, ["flow", "source_topic"], "left").select(
        "flow",
        "source_topic",
        "target_topic",
        "observed_at_ms",
        F.coalesce("_wanted", F.array().cast("array<string>")).alias("_wanted"),
        F.explode("t_acls").alias("_acl"),
    )
    extra = _row(
        extra_src.where(~F.array_contains("_wanted", F.col("_acl"))).dropDuplicates(["flow", "source_topic", "_acl"]),
        "acl_extra_on_target",
        item=F.col("_acl"),
        target_value=F.col("_acl"),
        expected=F.lit(True),
        exclusion_reason=F.lit("not copied from the source (MM2's rules never delete target ACLs)"),
    )
    return missing.unionByName(extra)


def _compacted_targets(snapshots: DataFrame) -> DataFrame:
    """(flow, source_topic, _compacted): whether the target topic's latest effective cleanup.policy compacts."""
    last = latest(snapshots.where(F.col("side") == "target"), ["flow", "cluster", "topic"], ["emitted_at_ms"])
    policy = F.coalesce(F.col("configs")["cleanup.policy"], F.lit(""))
    return last.groupBy("flow", "source_topic").agg(F.max(policy.contains("compact")).alias("_compacted"))


def _data_rows(audits: DataFrame, snapshots: DataFrame) -> DataFrame:
    last = latest(audits, ["flow", "source_topic", "partition", "window_start", "side"], ["emitted_at_ms"])
    s = last.where(F.col("side") == "source").alias("s")
    t = last.where(F.col("side") == "target").alias("t")
    pair = (
        s.join(t, ["flow", "source_topic", "partition", "window_start"], "inner")
        .where((F.col("s.record_count") != F.col("t.record_count")) | (F.col("s.checksum") != F.col("t.checksum")))
        .join(_compacted_targets(snapshots), ["flow", "source_topic"], "left")
    )
    compacted = F.coalesce(F.col("_compacted"), F.lit(False)) & (F.col("t.record_count") < F.col("s.record_count"))

    def describe(side: str) -> Column:
        return F.format_string(
            "count=%d checksum=%d extra_copies=%d",
            F.col(f"{side}.record_count"),
            F.col(f"{side}.checksum"),
            F.col(f"{side}.extra_copies"),
        )

    return _row(
        pair.select(
            "flow",
            "source_topic",
            "partition",
            "window_start",
            F.col("t.target_topic").alias("target_topic"),
            F.col("s.window_end").alias("window_end"),
            describe("s").alias("_s"),
            describe("t").alias("_t"),
            compacted.alias("_by_cleaner"),
            F.greatest("s.emitted_at_ms", "t.emitted_at_ms").alias("observed_at_ms"),
        ),
        F.when(F.col("_by_cleaner"), F.lit("target_records_compacted")).otherwise(F.lit("data")),
        item=F.format_string("offsets [%d, %d)", F.col("window_start"), F.col("window_end")),
        partition=F.col("partition"),
        window_start=F.col("window_start"),
        window_end=F.col("window_end"),
        source_value=F.col("_s"),
        target_value=F.col("_t"),
    )


def _deleted_rows(watermarks: DataFrame, mapping: DataFrame) -> DataFrame:
    mark = latest(watermarks.where(F.col("side") == "target"), MAPPING_KEY, ["observed_at_ms"])
    joined = mark.join(segments_by_partition(mapping), list(MAPPING_KEY), "inner").select(
        *MAPPING_KEY,
        F.col("topic").alias("target_topic"),
        "observed_at_ms",
        "log_start_offset",
        deleted_copies(F.col("_segments"), F.col("_first_copy"), F.col("log_start_offset")).alias("_gone"),
    )
    gone = joined.where(F.col("_gone.records") > 0)
    return _row(
        gone,
        "target_records_deleted",
        item=F.format_string("target offsets [%d, %d)", F.col("_gone.downstream_first"), F.col("log_start_offset")),
        partition=F.col("partition"),
        window_start=F.col("_gone.upstream_first"),
        window_end=F.col("_gone.upstream_last") + 1,
        source_value=F.format_string(
            "source offsets [%d, %d]", F.col("_gone.upstream_first"), F.col("_gone.upstream_last")
        ),
        target_value=F.format_string(
            "%d records deleted from the target by retention/deletion", F.col("_gone.records")
        ),
    )


def _life_rows(recreated: DataFrame, lost: DataFrame) -> DataFrame:
    """A source topic's re-creations and its records deleted before their copy (see the module)."""
    noted = {"target_topic": F.lit(None).cast("string"), "observed_at_ms": F.col("emitted_at_ms")}
    ends = F.concat_ws(", ", F.transform("log_end_offsets", lambda o: o.cast("string")))
    again = _row(
        recreated.where(F.col("side") == "source").withColumns(noted),
        "source_topic_recreated",
        item=F.format_string("topic id %s -> %s", F.col("previous_topic_id"), F.col("topic_id")),
        source_value=F.format_string("a new topic, log end offsets [%s]", ends),
        target_value=F.lit(RECREATED_VALUE),
    )
    gone = _row(
        lost.withColumns(noted),
        "records_lost_before_copy",
        item=F.format_string("source offsets [%d, %d)", F.col("from_offset"), F.col("to_offset")),
        partition=F.col("partition"),
        window_start=F.col("from_offset"),
        window_end=F.col("to_offset"),
        source_value=F.format_string("%d records", F.col("records")),
        target_value=F.lit(LOST_VALUE),
    )
    remote_ends = F.concat_ws(", ", F.transform("log_end_offsets", lambda o: o.cast("string")))
    recopy = F.coalesce(*(F.when(F.col("policy") == k, F.lit(v)) for k, v in RECOPY_VALUE.items()))
    remote = _row(
        recreated.where(F.col("side") == "target").withColumns(
            {"target_topic": F.col("topic"), "observed_at_ms": F.col("emitted_at_ms")}
        ),
        "target_topic_recreated",
        item=F.format_string("topic id %s -> %s", F.coalesce("previous_topic_id", F.lit("unknown")), F.col("topic_id")),
        source_value=recopy,
        target_value=F.format_string(REMOTE_RECREATED_VALUE.replace("{}", "%s"), remote_ends),
    )
    return again.unionByName(gone).unionByName(remote)


def divergence(
    snapshots: DataFrame,
    audits: DataFrame,
    config: MirrorlakeConfig | None = None,
    watermarks: DataFrame | None = None,
    mapping: DataFrame | None = None,
    recreated: DataFrame | None = None,
    lost: DataFrame | None = None,
) -> DataFrame:
    """The table from silver ``config_snapshot``, ``audit_window`` and ``watermark`` rows and gold
    ``offset_mapping`` (without the last two, no ``target_records_deleted`` rows), and silver
    ``topic_recreated`` and ``records_lost_before_copy`` (without them, no rows of the topics' lives)."""
    out = _topic_rows(snapshots, exclusions(config)).unionByName(_data_rows(audits, snapshots))
    if watermarks is not None and mapping is not None:
        out = out.unionByName(_deleted_rows(watermarks, mapping))
    if recreated is not None and lost is not None:
        out = out.unionByName(_life_rows(recreated, lost))
    return out


def _compute(inputs: GoldInputs) -> DataFrame:
    return divergence(
        inputs.restrict(inputs.silver("config_snapshot")),
        inputs.restrict(inputs.silver("audit_window")),
        inputs.config,
        inputs.restrict(inputs.silver("watermark")),
        current_mapping(inputs),
        inputs.restrict(inputs.silver("topic_recreated")),
        inputs.restrict(inputs.silver("records_lost_before_copy")),
    )


TABLE = GoldTable(
    SPEC,
    touched=lambda changes: touched_keys(changes, {event_type: KEY for event_type in SPEC.sources}),
    compute=_compute,
)
