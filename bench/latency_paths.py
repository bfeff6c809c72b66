"""End-to-end latency of mirrorlake's two produce paths, interleaved, with the stalls located.

``replicate_vs_mm2`` runs one latency probe per contender (2,000 records at 500/s), so its p99 is
decided by whether a stall of the machine (a broker's pause, a state task's burst) happens during
those 4 seconds. This bench runs the probe in rounds, alternating ``copy_engine: auto`` (the
compiled produce path) and ``copy_engine: python`` on fresh topics of the same clusters, and prints
per probe p50/p99/max and every *stall*: a run of consecutive records slower than ``--stall-ms``
(its first record, length and peak). A stall that hits both paths alike is the machine's.

    .venv/bin/python -m bench.latency_paths --rounds 4
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
from pathlib import Path

from bench.measure import Latency, measure_latency
from bench.ml_processes import MirrorlakeProcesses
from bench.replicate_vs_mm2 import cluster_config, flow_config
from bench.workload import create_topic, fast_dir
from mirrorlake.localkafka import down, resolve_kafka_jars, up
from replicator.config import MirrorlakeConfig
from replicator.config.cache import cache_root

_log = logging.getLogger(__name__)
ENGINES = ("auto", "python")


def stalls(samples_ms: list[float], over_ms: float) -> list[tuple[int, int, float]]:
    """Runs of consecutive samples above ``over_ms``: (first index, length, peak ms)."""
    out: list[tuple[int, int, float]] = []
    start = -1
    for i, value in enumerate([*samples_ms, 0.0]):
        if value > over_ms and start < 0:
            start = i
        elif value <= over_ms and start >= 0:
            out.append((start, i - start, max(samples_ms[start:i])))
            start = -1
    return out


def probe(clusters: MirrorlakeConfig, work: Path, args: argparse.Namespace, name: str, engine: str) -> Latency:
    source, target = clusters.cluster("S").bootstrap_servers, clusters.cluster("T").bootstrap_servers
    create_topic(source, name, args.partitions)
    replicator = MirrorlakeProcesses(flow_config(clusters, [name], engine), work / name, 1, until_caught_up=False)
    replicator.start()
    try:
        return measure_latency(
            source, target, name, f"S.{name}", partitions=args.partitions, value_size=args.value_size,
            count=args.records, rate=args.rate,
        )  # fmt: skip
    finally:
        replicator.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=4, help="measured rounds, each both paths (default 4)")
    parser.add_argument("--records", type=int, default=2000, help="records per probe (default 2000)")
    parser.add_argument("--rate", type=float, default=500.0, help="records/s of a probe (default 500)")
    parser.add_argument("--value-size", type=int, default=100, help="value bytes (default 100)")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--stall-ms", type=float, default=20.0, help="a record slower than this is in a stall")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.records < 2 or args.rate <= 0:
        parser.error("--rounds >= 1, --records >= 2 and --rate > 0 are needed")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    work = Path(tempfile.mkdtemp(prefix="bench-latency-paths-", dir=fast_dir()))
    clusters = cluster_config(work)
    resolve_kafka_jars(clusters.local_kafka.version, cache_root())
    up(clusters)
    try:
        for rnd in range(args.rounds + 1):  # round 0 warms the brokers and both paths up: shown, not counted
            for engine in ENGINES:
                latency = probe(clusters, work, args, f"lat-{engine}-{rnd}", engine)
                found = stalls(latency.samples_ms, args.stall_ms)
                label = "warm-up" if rnd == 0 else f"round {rnd}"
                print(
                    f"{label} {engine:6}: p50 {latency.percentile(50):6.1f} ms  p99 {latency.percentile(99):6.1f} ms  "
                    f"max {max(latency.samples_ms):6.1f} ms  stalls (first record, records, peak ms): "
                    + (", ".join(f"({i}, {n}, {peak:.0f})" for i, n, peak in found) or "none"),
                    flush=True,
                )
    finally:
        down(clusters)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
