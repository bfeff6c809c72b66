"""State topics -> bronze without Spark, for ``lakehouse serve``: librdkafka reads, delta-rs appends.

Spark's stream (``ingest.bronze``) runs a micro-batch job per trigger, and on a small machine those
jobs took the CPU the refreshes needed (``bench/freshness.py``: batches of 2-11 s behind a 2 s
trigger). Here one read_committed consumer per state cluster (the replicator's own client
settings, so every security setting it accepts works here too) drains what its state topic holds
when ``pull`` is called and appends it to bronze in one delta-rs commit, the same columns Spark's
stream writes.

Where to go on from is bronze itself: the offset after the highest one bronze holds per (cluster,
topic, partition), read once when the ingest starts and carried forward in memory. Every append is
one commit, so a crash at any instant leaves bronze with whole pulls only, and the next start
reads from the first offset it lacks: each record lands exactly once, whichever engine wrote the
rows before (``spark_start`` gives Spark's stream the same rule when it runs after this one).

A state-topic offset that no longer exists (the topic re-created, or retention deleted records
bronze never got) stops the ingest with an ``IngestError`` naming the partition, as Spark's
``failOnDataLoss`` does: bronze is the lakehouse's source of truth and must not silently skip.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import TableNotFoundError

from ingest.paths import LakehousePaths
from ingest.storage import delta_options, remove_tree
from replicator.config import MirrorlakeConfig
from replicator.errors import MirrorlakeError
from replicator.kafka.clients import new_consumer
from replicator.kafka.errors import kafka_error_reason
from replicator.kafka.log_bounds import topic_bounds
from replicator.kafka.settings import reader_config

__all__ = ["BRONZE_SCHEMA", "IngestError", "KafkaBronzeIngest", "MOST_ROWS_PER_PULL", "bronze_positions", "spark_start"]

_log = logging.getLogger(__name__)

# the columns and types Spark's stream writes (``ingest.bronze._raw_stream``)
BRONZE_SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("kafka_timestamp", pa.timestamp("us", tz="UTC")),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("ingested_at", pa.timestamp("us", tz="UTC")),
    ]
)
MOST_ROWS_PER_PULL = 2_000_000  # as Spark's maxOffsetsPerTrigger: a pull after a long pause is bounded
_IDLE_S = 0.2  # a consume that waits this long for nothing: time to ask where the partitions stand
# quiet this long short of the ends (read_committed: an end is the last stable offset, so only a
# broker that does not answer): the rest at the next pull, not a refresh held up
_PATIENCE_S = 3.0
_POLL_BATCH = 10_000
_CHECKPOINT_EVERY = 10  # Spark's default delta.checkpointInterval (delta-rs's is 100)

Positions = dict[tuple[str, str, int], int]  # (cluster, topic, partition) -> the next offset to read


class IngestError(MirrorlakeError):
    """Bronze cannot be brought up to date without losing or inventing state-topic records."""


def _table(path: Path) -> DeltaTable | None:
    try:
        return DeltaTable(str(path), storage_options=delta_options(path))
    except TableNotFoundError:
        return None


def bronze_positions(path: Path) -> Positions:
    """Per (cluster, topic, partition) that bronze holds rows of: the offset after its highest."""
    table = _table(path)
    if table is None:
        return {}
    return _after_highest(table.to_pyarrow_dataset().to_table(columns=["cluster", "topic", "partition", "offset"]))


def _after_highest(rows: pa.Table) -> Positions:
    if rows.num_rows == 0:
        return {}
    top = rows.group_by(["cluster", "topic", "partition"]).aggregate([("offset", "max")])
    return {
        (c, t, int(p)): int(o) + 1
        for c, t, p, o in zip(
            top["cluster"].to_pylist(),
            top["topic"].to_pylist(),
            top["partition"].to_pylist(),
            top["offset_max"].to_pylist(),
            strict=True,
        )
    }


@dataclass
class _Cluster:
    alias: str
    consumer: Consumer
    assigned: set[int]


class KafkaBronzeIngest:
    """Bronze kept up to date from ``clusters`` (aliases with a state topic) by ``pull``; ``close`` ends it.

    One instance writes at a time per lakehouse: the caller holds the writer lease.
    """

    def __init__(self, config: MirrorlakeConfig, paths: LakehousePaths, clusters: Iterable[str]) -> None:
        self._topic = config.state_topic
        self._next = bronze_positions(paths.bronze)
        self._clusters = [
            _Cluster(
                alias,
                new_consumer(
                    {
                        **reader_config(config.cluster(alias).client_config(), "mirrorlake-bronze"),
                        "auto.offset.reset": "error",  # an offset gone is an error here, never a jump
                        "enable.partition.eof": False,
                    }
                ),
                set(),
            )
            for alias in clusters
        ]
        if _table(paths.bronze) is None:
            write_deltalake(str(paths.bronze), BRONZE_SCHEMA.empty_table(), storage_options=delta_options(paths.bronze))
        # opened once: each append moves it to its new version (no log replay per pull)
        self._table = DeltaTable(str(paths.bronze), storage_options=delta_options(paths.bronze))
        self._schema = pa.schema(self._table.schema().to_arrow())  # Spark's, when Spark created it (nullability)

    def close(self) -> None:
        for cluster in self._clusters:
            cluster.consumer.close()

    def pull(self) -> int:
        """Append what every state topic holds now past bronze (read_committed), in one commit; the rows."""
        batches = [self._drain(cluster) for cluster in self._clusters]
        rows = pa.concat_tables(batches) if batches else BRONZE_SCHEMA.empty_table()
        if rows.num_rows:
            write_deltalake(self._table, rows.select(self._schema.names).cast(self._schema), mode="append")
            self._next.update(_after_highest(rows))
            if self._table.version() % _CHECKPOINT_EVERY == 0:  # Spark's interval: its readers replay at most ten
                self._table.create_checkpoint()
        return rows.num_rows

    def _drain(self, cluster: _Cluster) -> pa.Table:
        """The records of ``cluster``'s state topic from bronze's positions up to its end at the call."""
        consumer, topic = cluster.consumer, self._topic
        try:
            bounds = topic_bounds(consumer, topic)
        except KafkaException as exc:
            raise IngestError(f"cannot read {topic} on {cluster.alias}: {kafka_error_reason(exc)}") from exc
        if bounds is None:
            return BRONZE_SCHEMA.empty_table()
        for p, (_low, high) in sorted(bounds.items()):
            held = self._next.get((cluster.alias, topic, p))
            if held is not None and held > high:
                raise IngestError(
                    f"{topic}[{p}] on {cluster.alias} ends at offset {high} now, but bronze holds its records up "
                    f"to {held - 1}: the topic was deleted and created again, and its new records would be "
                    "taken for ones bronze has; ingest the new topic into a new lakehouse"
                )
        new = sorted(set(bounds) - cluster.assigned)
        if new:
            starts = [self._next.get((cluster.alias, topic, p), OFFSET_BEGINNING) for p in new]
            for p, start in zip(new, starts, strict=True):
                low, _high = bounds[p]
                if start != OFFSET_BEGINNING and start < low:
                    raise IngestError(
                        f"{topic}[{p}] on {cluster.alias} starts at offset {low} now, but bronze has only read "
                        f"up to {start}: records {start}..{low - 1} are gone (retention, or the topic was "
                        "re-created); bronze would miss them"
                    )
            consumer.incremental_assign([TopicPartition(topic, p, s) for p, s in zip(new, starts, strict=True)])
            cluster.assigned.update(new)
        # a partition bronze holds to its end, or an empty one, has nothing to wait for
        goal = {
            p: high
            for p, (low, high) in bounds.items()
            if max(self._next.get((cluster.alias, topic, p), low), low) < high
        }
        return self._read(cluster, goal)

    def _read(self, cluster: _Cluster, goal: dict[int, int]) -> pa.Table:
        """Up to ``goal`` (each partition's end at the call), and whatever else the consumer fetched
        meanwhile. Partitions are never paused: librdkafka fetches in its own threads between pulls
        (a pause drops what it fetched), so a pull mostly takes what is already here."""
        topic, consumer = self._topic, cluster.consumer
        done = self._through(cluster, goal, set())  # read past its goal's markers by the pull before
        columns: dict[str, list] = {name: [] for name in BRONZE_SCHEMA.names}
        now = datetime.now(UTC)
        quiet_since = time.monotonic()
        while len(done) < len(goal) and len(columns["offset"]) < MOST_ROWS_PER_PULL:
            messages = consumer.consume(_POLL_BATCH, timeout=_IDLE_S)
            if not messages:
                # the fetch may still be on its way (a busy machine), or the partition's last offsets
                # are transaction markers, which are never returned: its position says it is through
                done |= self._through(cluster, goal, done)
                if len(done) < len(goal) and time.monotonic() - quiet_since > _PATIENCE_S:
                    _log.info(
                        "bronze: %s[%s] on %s not read to its end in %.0f s; the rest at the next pull",
                        topic, ",".join(str(p) for p in sorted(set(goal) - done)), cluster.alias, _PATIENCE_S,
                    )  # fmt: skip
                    break
                continue
            quiet_since = time.monotonic()
            records = [m for m in messages if m.error() is None]
            if len(records) < len(messages):
                for msg in messages:
                    if (error := msg.error()) is not None:
                        self._on_error(cluster.alias, error, msg.partition())
            # column by column: a loop of appends per record was most of a pull's time
            partitions, offsets = [m.partition() for m in records], [m.offset() for m in records]
            columns["partition"] += partitions
            columns["offset"] += offsets
            columns["kafka_timestamp"] += [m.timestamp()[1] * 1000 for m in records]
            columns["key"] += [m.key() for m in records]
            columns["value"] += [m.value() for m in records]
            for p, offset in dict(zip(partitions, offsets, strict=True)).items():  # each partition's last
                if p in goal and p not in done and offset is not None and offset + 1 >= goal[p]:
                    done.add(p)
        n = len(columns["offset"])
        columns["cluster"], columns["topic"], columns["ingested_at"] = [cluster.alias] * n, [topic] * n, [now] * n
        return pa.table(columns, schema=BRONZE_SCHEMA)

    def _through(self, cluster: _Cluster, goal: dict[int, int], done: set[int]) -> set[int]:
        """The partitions not yet ``done`` whose consumer position reached their goal."""
        waiting = [TopicPartition(self._topic, p) for p in sorted(set(goal) - done)]
        return {tp.partition for tp in cluster.consumer.position(waiting) if tp.offset >= goal[tp.partition]}

    @staticmethod
    def _on_error(alias: str, error: KafkaError, partition: int | None) -> None:
        if error.code() == KafkaError._AUTO_OFFSET_RESET:
            raise IngestError(
                f"state topic partition {partition} on {alias}: bronze's next offset no longer exists "
                f"({error.str()}): records were deleted before bronze read them, or the topic was re-created"
            )
        if error.fatal():
            raise IngestError(f"reading the state topic on {alias}: {error.str()}")
        _log.warning("reading the state topic on %s: %s (retried)", alias, error.str())


def spark_start(
    paths: LakehousePaths, alias: str, topic: str, partitions: int, positions: Positions
) -> tuple[str, str | None]:
    """(the checkpoint Spark's bronze stream from ``alias`` runs with, its ``startingOffsets`` JSON:
    None to go on from the checkpoint).

    The checkpoint stands while bronze holds nothing past the offsets it planned last (what Spark
    wrote, or was about to: its Delta sink writes a planned batch once). When bronze holds more (this
    module's ingest moved on), a checkpoint of its own starts at bronze's positions (the earliest
    offset for a partition bronze has none of) and the old ones are removed: they would read again.
    """
    base = f"bronze-{alias}"
    existing = [p for p in _checkpoints(paths) if p.name == base or p.name.startswith(f"{base}-from-")]
    mine = {p: n for (c, t, p), n in positions.items() if (c, t) == (alias, topic)}
    current = existing[-1] if existing else None
    if current is None and not mine:
        return base, None
    if current is not None:
        planned = _planned_offsets(current, topic)
        if all(p in planned and n <= planned[p] for p, n in mine.items()):
            return current.name, None
    count = max([partitions, *(p + 1 for p in mine)])  # 0: the cluster did not answer (Spark will say so)
    start = {str(p): mine.get(p, -2) for p in range(count)}
    name = f"{base}-from-{_fingerprint(start)}"
    for old in existing:
        if old.name != name:
            _log.info("bronze: Spark's stream checkpoint %s is behind bronze: removed", old.name)
            remove_tree(old)
    return name, json.dumps({topic: start})


def _fingerprint(start: dict[str, int]) -> str:
    return str(sum(v for v in start.values() if v > 0))


def _checkpoints(paths: LakehousePaths) -> list[Path]:
    root = paths.checkpoint("")
    if not root.exists():
        return []
    return sorted((p for p in root.iterdir() if p.name.startswith("bronze-")), key=lambda p: p.name)


def _planned_offsets(checkpoint: Path, topic: str) -> dict[int, int]:
    """The end offsets of the newest batch the stream planned (its ``offsets/<n>`` file), per partition."""
    offsets = checkpoint / "offsets"
    if not offsets.exists():
        return {}
    numbered = [p for p in offsets.iterdir() if p.name.isdigit()]
    if not numbered:
        return {}
    newest = max(numbered, key=lambda p: int(p.name))
    lines = newest.read_text().splitlines()
    # v1, the batch's metadata, then one line per source: {"topic": {"partition": offset}}
    for line in lines[2:]:
        try:
            source = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(source, dict) and topic in source:
            return {int(p): int(o) for p, o in source[topic].items()}
    return {}
