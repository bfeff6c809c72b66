"""Benchmark: what a failed-over consumer re-reads and loses, mirrorlake's translation vs MirrorMaker 2's.

One source topic on A (keyed records, then committed and aborted transactions, which leave gaps in
the source offsets); consumer groups commit offsets all over it on A, most of them lagging behind
its end. mirrorlake replicates A->B (``Replicator``, default policy) and MirrorMaker 2 replicates
A->C (dedicated mode, checkpoints every second, its default ``offset.lag.max=100``), side by side.

For every group and partition with committed offset ``c``, a consumer failing over resumes at:

* mirrorlake: ``MappingIndex.translate`` over the offset syncs in B's state topic (what its
  checkpoints compute); the latest mirrorlake ``Checkpoint`` event of the group is shown beside it
  when the replicator's checkpoint task emitted one;
* MM2: its latest checkpoint in C's ``A.checkpoints.internal`` (decoded with
  ``replicator.mm2.records``), or the start of the partition when MM2 wrote none.

Ground truth is by content (``mirrorlake.groundtruth``): each target record is matched to the source
record with its key. Re-read = copies at or after the resume offset of source records before ``c``;
lost = replicated source records at or after ``c`` with no copy at or after the resume offset.

    .venv/bin/python -m bench.translation_vs_mm2 --records 30000

The last lines are ``reread_records_mirrorlake=<n>`` and ``reread_records_mm2=<n>``.
"""

from __future__ import annotations

import argparse
import logging
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from bench.failover import Comparison, FailoverCosts, GroupRow, copies_by_content, format_report, read_partition
from bench.ml_processes import config_document
from bench.mm2 import MirrorMaker2, Mm2Settings, checkpoint_properties
from mirrorlake.localkafka import down, require_java, resolve_kafka_jars, up
from mirrorlake.traffic import ensure_topic, produce_sample_traffic
from replicator.client.mapping_index import MappingIndex
from replicator.client.state_reader import read_state_log
from replicator.config import MirrorlakeConfig, parse_config
from replicator.config.cache import cache_root
from replicator.events import Checkpoint
from replicator.flow.runtime import Replicator
from replicator.mm2.records import Mm2Checkpoint, Mm2RecordError, decode_checkpoint

__all__ = ["commit_groups", "group_offsets", "mm2_latest_checkpoints", "run_comparison"]

_log = logging.getLogger("bench.translation_vs_mm2")
_FLOW_ML = "A->B"


def commit_groups(bootstrap: str, topic: str, offsets: Mapping[str, Mapping[int, int]]) -> None:
    """Commit ``offsets[group][partition]`` for each group on ``bootstrap`` (no group membership)."""
    for group, by_partition in offsets.items():
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        tps = [TopicPartition(topic, p, o) for p, o in by_partition.items()]
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    consumer.commit(offsets=tps, asynchronous=False)
                    break
                except KafkaException as exc:
                    moving = exc.args[0].code() in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
                    if not moving or time.monotonic() > deadline:
                        raise
                    time.sleep(0.3)  # a fresh cluster's group coordinator is still loading
        finally:
            consumer.close()


def mm2_latest_checkpoints(bootstrap: str, topic: str) -> tuple[dict[tuple[str, str, int], Mm2Checkpoint], int]:
    """The latest MM2 checkpoint per (group, target topic, partition) in ``topic``, and how many were bad."""
    latest: dict[tuple[str, str, int], Mm2Checkpoint] = {}
    bad = 0
    for rec in read_partition(bootstrap, topic, 0):
        try:
            cp = decode_checkpoint(rec.key, rec.value)
        except Mm2RecordError as exc:
            _log.warning("%s@%d: %s", topic, rec.offset, exc)
            bad += 1
            continue
        latest[(cp.group, cp.topic, cp.partition)] = cp
    return latest, bad


def group_offsets(ends: Mapping[int, int], fractions: list[float], run: str) -> dict[str, dict[int, int]]:
    """One group per fraction of each partition's end offset (1.0 = caught up); never offset 0."""
    return {
        f"{run}-g{i:02d}-at-{f:.3f}": {p: max(1, round(end * f)) for p, end in ends.items()}
        for i, f in enumerate(fractions)
    }


def run_comparison(
    config: MirrorlakeConfig,
    *,
    work_dir: Path,
    topic: str,
    records: int,
    partitions: int,
    fractions: list[float],
    transactions: int = 6,
    records_per_transaction: int = 30,
    mm2_timeout_s: float = 300.0,
) -> Comparison:
    """Fill ``topic`` on A, commit groups, replicate A->B (mirrorlake) and A->C (MM2), compare.

    ``config`` names clusters A, B and C and may have any flows: the run uses a flow A->B that
    selects exactly ``topic``.
    """
    a, b, c = (config.cluster(x).bootstrap_servers for x in ("A", "B", "C"))
    ensure_topic(a, topic, partitions)
    produce_sample_traffic(
        a,
        topic,
        records=records,
        partitions=partitions,
        transactions=transactions,
        records_per_transaction=records_per_transaction,
    )
    probe = Consumer({"bootstrap.servers": a, "group.id": "bench-probe"})
    ends = {p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    probe.close()
    groups = group_offsets(ends, fractions, topic[-6:])
    commit_groups(a, topic, groups)
    committed = {(g, p): o for g, by_p in groups.items() for p, o in by_p.items()}

    mm2 = MirrorMaker2(
        java=require_java(),
        lib_dir=resolve_kafka_jars(config.local_kafka.version, cache_root()),
        work_dir=work_dir / "mm2-translation",
        source=a,
        target=c,
        topics=[topic],
        settings=Mm2Settings(
            tuned_producer=False, heap="512m", source_alias="A", target_alias="C", properties=checkpoint_properties()
        ),
    )
    mm2.start()
    try:
        data = config_document(config)
        data["flows"] = [{"source": "A", "target": "B", "topics": [re.escape(topic)]}]
        flow_config = parse_config(data, source="bench/translation_vs_mm2.py")
        stats = Replicator(flow_config, flows=[_FLOW_ML], status_port=None).run_until_caught_up()
        _log.info("mirrorlake A->B: %d records copied", stats[_FLOW_ML].records)
        _wait_for_mm2(mm2, c, topic, committed, partitions, mm2_timeout_s)
    finally:
        mm2.stop()

    state = read_state_log(flow_config.cluster("B").client_config(), flow_config.state_topic)
    index = MappingIndex()
    index.add(e for e in state.events if e.flow == _FLOW_ML)
    ml_checkpoints: dict[tuple[str, int], Checkpoint] = {}
    for e in state.events:
        if isinstance(e, Checkpoint) and e.flow == _FLOW_ML and e.source_topic == topic:
            seen = ml_checkpoints.get((e.group, e.partition))
            if seen is None or e.emitted_at_ms >= seen.emitted_at_ms:
                ml_checkpoints[(e.group, e.partition)] = e
    mm2_checkpoints, mm2_bad = mm2_latest_checkpoints(c, "A.checkpoints.internal")

    rows: list[GroupRow] = []
    foreign = {"B": 0, "C": 0}
    for p in range(partitions):
        source = read_partition(a, topic, p)
        costs = {}
        for alias, bootstrap in (("B", b), ("C", c)):
            target = read_partition(bootstrap, f"A.{topic}", p)
            copies = copies_by_content(source, target)
            foreign[alias] += len(target) - len(copies)
            costs[alias] = FailoverCosts(copies)
        for (group, partition), offset in sorted(committed.items()):
            if partition != p:
                continue
            ours = index.translate(_FLOW_ML, topic, p, offset)
            ml_t = ours.downstream if ours is not None else 0
            ckpt = ml_checkpoints.get((group, p))
            theirs = mm2_checkpoints.get((group, f"A.{topic}", p))
            mm2_t = theirs.downstream_offset if theirs is not None and theirs.downstream_offset >= 0 else None
            rows.append(
                GroupRow(
                    group=group,
                    partition=p,
                    committed=offset,
                    exact=costs["B"].exact(offset),
                    mirrorlake=ours.downstream if ours is not None else None,
                    mirrorlake_cost=costs["B"].cost(offset, ml_t),
                    mirrorlake_checkpoint=ckpt.downstream_offset if ckpt is not None else None,
                    mirrorlake_checkpoint_cost=costs["B"].cost(offset, ckpt.downstream_offset) if ckpt else None,
                    mm2=mm2_t,
                    mm2_cost=costs["C"].cost(offset, mm2_t if mm2_t is not None else 0),
                )
            )
    return Comparison(topic, sum(ends.values()), tuple(rows), foreign["B"], foreign["C"], mm2_bad)


def _wait_for_mm2(
    mm2: MirrorMaker2,
    bootstrap: str,
    topic: str,
    committed: Mapping[tuple[str, int], int],
    partitions: int,
    timeout_s: float,
) -> None:
    """Until MM2 checkpointed every group at its committed offset (or ``timeout_s``: some never are)."""
    deadline = time.monotonic() + timeout_s
    remote = f"A.{topic}"
    while time.monotonic() < deadline:
        if not mm2.alive():
            raise RuntimeError(f"MM2 exited\n{mm2.log_tail()}")
        try:
            latest, _bad = mm2_latest_checkpoints(bootstrap, "A.checkpoints.internal")
        except (AssertionError, KafkaException):  # the topic does not exist yet
            latest = {}
        missing = [
            k
            for k, c in committed.items()
            if (cp := latest.get((k[0], remote, k[1]))) is None or cp.upstream_offset != c
        ]
        if not missing:
            return
        time.sleep(2)
    _log.warning("MM2 did not checkpoint %d group partitions within %g s", len(missing), timeout_s)


# -- command line -------------------------------------------------------------------------------

_FRACTIONS = [0.001, 0.01, 0.03, 0.1, 0.2, 0.33, 0.5, 0.61, 0.75, 0.87, 0.95, 0.99, 0.999, 1.0]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=30_000, help="plain records on A (default 30,000)")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--transactions", type=int, default=6, help="transactions after them, every other aborted")
    parser.add_argument("--work-dir", type=Path, help="cluster data and logs (default: a new temp dir)")
    parser.add_argument("--keep-work-dir", action="store_true")
    parser.add_argument("--output", type=Path, help="also write the report here (e.g. bench/results/...)")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from bench.replicate_vs_mm2 import environment
    from mirrorlake.localkafka.ports import find_free_port_pair

    args = parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("replicator.librdkafka").setLevel(logging.WARNING)
    work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-translation-vs-mm2-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    ports: set[int] = set()
    clusters = {}
    for alias in ("A", "B", "C"):
        port = find_free_port_pair(ports)
        ports.update({port, port + 1})
        clusters[alias] = {"bootstrap_servers": f"127.0.0.1:{port}"}
    config = parse_config(
        {"clusters": clusters, "local_kafka": {"work_dir": str(work_dir / "clusters")}},
        source="bench/translation_vs_mm2.py",
    )
    started = time.monotonic()
    try:
        up(config)
        comparison = run_comparison(
            config,
            work_dir=work_dir,
            topic=f"bench-translation-{int(time.time())}",
            records=args.records,
            partitions=args.partitions,
            fractions=_FRACTIONS,
            transactions=args.transactions,
        )
    finally:
        down(config)
        if not args.keep_work_dir:
            shutil.rmtree(work_dir, ignore_errors=True)
    lines = [
        *environment(config),
        f"source: {comparison.records} offsets on A ({args.records} plain records, {args.transactions} "
        f"transactions, every other aborted) in {args.partitions} partitions; mirrorlake A->B, MM2 A->C "
        f"(offset.lag.max=100, checkpoints every 1 s); run took {time.monotonic() - started:.0f} s",
        "",
        *format_report(comparison),
    ]
    print("\n".join(lines))
    if args.output:
        args.output.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
