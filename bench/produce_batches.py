"""Back-to-back copies: the replicator's CPU per GB beside the size of the batches it produced.

Not a test: prints what each copy measured, in one run on one pair of local clusters.

    .venv/bin/python -m bench.produce_batches --copies 8 --size 100 --records 2000000
    .venv/bin/python -m bench.produce_batches --copies 8 --target-client max.in.flight.requests.per.connection=2

Each copy prefills a fresh topic (6 partitions), runs ``mirrorlake replicate --until-caught-up``
(audits off, as ``replicate_vs_mm2`` runs it), and reads the target's log segment files to count
its record batches: with a 1 ms linger a busy flow's batches are sized by how fast the target
acknowledges, and every produce request costs the client CPU. Copy 0 meets cold brokers.

With ``--target-client KEY=VALUE`` the copies alternate between the default settings (even
copies) and the default plus those librdkafka settings on the target cluster (odd copies), side by
side on the same brokers, and the run ends with each variant's medians over its warm copies.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import struct
import tempfile
import time
from pathlib import Path

from bench.measure import processes_cpu
from bench.ml_processes import MirrorlakeProcesses
from bench.replicate_vs_mm2 import cluster_config, flow_config
from bench.workload import RecordSpec, drop_topics, fast_dir, prefill
from mirrorlake.localkafka import down, local_brokers, up

_BATCH_HEADER = 61  # bytes of a v2 record batch before its records
_LAST_OFFSET_DELTA_AT = 23  # baseOffset 8, batchLength 4, leaderEpoch 4, magic 1, crc 4, attributes 2


def count_batches(partition_dir: Path) -> tuple[int, int]:
    """(record batches, records) in the ``.log`` segments of one partition's directory."""
    batches = records = 0
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        pos = 0
        while pos + _BATCH_HEADER <= len(data):
            _base, length = struct.unpack_from(">qi", data, pos)
            if length <= 0:
                break
            (last_delta,) = struct.unpack_from(">i", data, pos + _LAST_OFFSET_DELTA_AT)
            batches += 1
            records += last_delta + 1
            pos += 12 + length
    return batches, records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=8)
    parser.add_argument("--size", type=int, default=100, help="value bytes")
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument(
        "--target-client",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a librdkafka setting of the target cluster for every odd copy (repeatable)",
    )
    args = parser.parse_args()
    variant = dict(setting.split("=", 1) for setting in args.target_client)
    results: dict[str, list[tuple[float, float]]] = {}  # variant -> (s/GB, records per batch) of warm copies

    work = Path(tempfile.mkdtemp(prefix="produce-batches-", dir=fast_dir()))
    clusters = cluster_config(work)
    brokers = local_brokers(clusters)
    target = next(b for b in brokers if b.alias == "T")
    up(clusters)
    print(
        f"# produce_batches: {args.copies} copies of {args.records} records of {args.size} B, "
        f"{args.partitions} partitions, load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    try:
        source, target_bootstrap = (clusters.cluster(a).bootstrap_servers for a in ("S", "T"))
        broker_cpu = processes_cpu(lambda: [p for p in (b.pid() for b in brokers) if p is not None])
        for copy in range(args.copies):
            topic = f"batches-{copy}-{os.getpid()}"
            spec = RecordSpec(args.records, args.size, args.partitions)
            prefill(source, topic, spec)
            settings = variant if copy % 2 else {}
            name = ", ".join(f"{k}={v}" for k, v in settings.items()) or "default"
            replicator = MirrorlakeProcesses(
                flow_config(clusters, [topic], target_client=settings), work / f"copy-{copy}", 1, until_caught_up=True
            )
            brokers_before, began = broker_cpu(), time.monotonic()
            replicator.start()
            while replicator.alive():
                replicator.cpu()  # read while it runs: an exited process keeps its last reading
                time.sleep(0.2)
            replicator.wait(900)
            took, cpu, brokers_used = time.monotonic() - began, replicator.cpu(), broker_cpu() - brokers_before
            batches = records = 0
            for partition_dir in target.data_dir.glob(f"S.{topic}-*"):
                b, r = count_batches(partition_dir)
                batches, records = batches + b, records + r
            per_gb, per_batch = cpu / (spec.total_bytes / 1e9), records / max(1, batches)
            print(
                f"copy {copy} ({name}): {args.records / took:>9,.0f} records/s  replicator CPU {cpu:5.1f} s "
                f"({per_gb:5.1f} s/GB)  brokers CPU {brokers_used:5.1f} s  "
                f"target {batches} batches of {records} records: {per_batch:,.0f} per batch",
                flush=True,
            )
            if copy >= 2:  # copies 0 and 1 meet cold brokers, one of each variant
                results.setdefault(name, []).append((per_gb, per_batch))
            drop_topics(source, [topic])
            drop_topics(target_bootstrap, [f"S.{topic}"])
    finally:
        down(clusters)
        shutil.rmtree(work, ignore_errors=True)
    medians = {name: statistics.median(r[0] for r in rows) for name, rows in results.items()}
    for name, rows in results.items():
        batch = statistics.median(r[1] for r in rows)
        print(f"median of {len(rows)} warm copies ({name}): {medians[name]:.1f} s/GB, {batch:,.0f} per batch")
    if len(medians) == 2:
        other = next(name for name in medians if name != "default")
        print(f"cpu_per_gb_ratio_variant_vs_default={medians[other] / medians['default']:.3f}")


if __name__ == "__main__":
    main()
