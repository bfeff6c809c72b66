"""Benchmark: the same measurement of several source trees' ``mirrorlake replicate``, interleaved.

Two measurements that this machine's noise disturbs little (its copy *rate* swings up to 2x between
runs of one benchmark, raw produce-only included, with nothing else running):

- ``cpu``: CPU seconds (user + system, every thread: librdkafka's included, from ``wait4``) that
  ``mirrorlake replicate --until-caught-up`` spends copying ``--records`` prefilled records, per
  record; and its wall time from launch;
- ``latency``: end-to-end latency of a trickle (``--rate`` records/s, ``bench.measure.measure_latency``)
  through a running ``mirrorlake replicate``, after a warm-up probe that is not counted.

Each tree runs as a child process from its own directory (``NAME=PATH``, e.g. a ``git worktree``
of an older commit, or ``.``), in rotating order over ``--rounds``, against the same two local
clusters on tmpfs (``bench.workload.fast_dir``), after one uncounted run of the first tree (runs in
the clusters' first minute were slower, whichever tree ran there).

    .venv/bin/python -m bench.tree_compare cpu --size 1024 --records 1000000 new=. old=../wt-old
    .venv/bin/python -m bench.tree_compare latency --size 1024 new=. old=../wt-old
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml

from bench.measure import load_average, measure_latency
from bench.replicate_vs_mm2 import cluster_config, environment
from bench.workload import RecordSpec, create_topic, drop_topics, fast_dir, prefill
from mirrorlake.localkafka import down, up

_log = logging.getLogger("bench.tree_compare")
PARTITIONS = 6


def _config(path: Path, source: str, target: str, *topics: str) -> Path:
    doc = {
        "clusters": {"S": {"bootstrap_servers": source}, "T": {"bootstrap_servers": target}},
        "flows": [{"source": "S", "target": "T", "topics": list(topics), "audit": False}],
    }
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def _replicate(tree: Path, config: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "mirrorlake.cli", "replicate", str(config), *extra],
        cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def measure_cpu(tree: Path, work: Path, source: str, target: str, topic: str, args: argparse.Namespace) -> str:
    prefill(source, topic, RecordSpec(args.records, args.size, PARTITIONS))
    time.sleep(1)  # the prefill's flush settles on the brokers
    started = time.monotonic()
    proc = _replicate(tree, _config(work / f"{topic}.yaml", source, target, topic), "--until-caught-up")
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{tree}: mirrorlake replicate exited {os.waitstatus_to_exitcode(status)}")
    drop_topics(source, [topic])
    drop_topics(target, [f"S.{topic}"])
    cpu = usage.ru_utime + usage.ru_stime
    return f"{1e6 * cpu / args.records:.2f} us/record CPU, {wall:.1f} s wall"


def measure_trickle(tree: Path, work: Path, source: str, target: str, topic: str, args: argparse.Namespace) -> str:
    warm = f"{topic}-warm-up"
    create_topic(source, topic, PARTITIONS)
    create_topic(source, warm, PARTITIONS)
    proc = _replicate(tree, _config(work / f"{topic}.yaml", source, target, topic, warm))
    try:
        measure_latency(
            source, target, warm, f"S.{warm}", partitions=PARTITIONS, value_size=args.size, count=500, rate=args.rate
        )  # on a topic of its own: the flow's start (group join, state tasks' first rounds) is not measured
        latency = measure_latency(
            source, target, topic, f"S.{topic}", partitions=PARTITIONS, value_size=args.size,
            count=args.latency_records, rate=args.rate,
        )  # fmt: skip
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    drop_topics(source, [topic, warm])
    return latency.summary()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("measure", choices=["cpu", "latency"])
    parser.add_argument("trees", nargs="+", help="NAME=PATH of each source tree")
    parser.add_argument("--size", type=int, default=1024, help="value bytes")
    parser.add_argument("--records", type=int, default=1_000_000, help="records per cpu run")
    parser.add_argument("--latency-records", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=500.0, help="records/s of the latency trickle")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    trees = [(name, Path(path).resolve()) for name, path in (t.split("=", 1) for t in args.trees)]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run = measure_cpu if args.measure == "cpu" else measure_trickle
    work = Path(tempfile.mkdtemp(prefix="bench-tree-compare-", dir=fast_dir()))
    clusters = cluster_config(work)
    load_before = load_average()
    lines = []
    try:
        up(clusters)
        source, target = clusters.cluster("S").bootstrap_servers, clusters.cluster("T").bootstrap_servers
        name, tree = trees[0]  # the clusters' first minute is slower for whoever runs in it: not counted
        _log.info("warm-up (not counted) %s: %s", name, run(tree, work, source, target, f"cmp-warm-{name}", args))
        for rnd in range(args.rounds):
            for name, tree in trees[rnd % len(trees) :] + trees[: rnd % len(trees)]:
                result = run(tree, work, source, target, f"cmp-{args.measure}-{rnd}-{name}", args)
                lines.append((name, result))
                _log.info("round %d %s: %s", rnd, name, result)
    finally:
        down(clusters)
        shutil.rmtree(work, ignore_errors=True)
    print()
    print("\n".join(environment(clusters)))
    print(f"load average at start {load_before}, at end {load_average()}")
    print(f"{args.measure}: {args.size} B values, {PARTITIONS} partitions, rounds {args.rounds}")
    for name, _tree in trees:
        for result in (r for n, r in lines if n == name):
            print(f"  {name:12} {result}")
    if args.measure == "cpu":
        for name, _tree in trees:
            cpu = statistics.median(float(r.split()[0]) for n, r in lines if n == name)
            print(f"cpu_us_per_record_{name}={cpu:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
