"""A lakehouse build (silver + gold) against Spark's driver heap, side by side on one bronze table.

Not a test: prints numbers measured in one run on one machine.

    .venv/bin/python -m bench.driver_memory --events 10000000 --memory 3g,4g --rounds 2

Bronze (``bench.lakehouse_scale``'s synthetic events) is written once. The heap is fixed when the
JVM starts, so each build runs in a process of its own (``--one``), on a hard-linked copy of that
bronze (Delta never rewrites a file in place), and the rounds alternate the variants so drift in
the machine falls on each alike. In local mode the driver's heap is all of Spark's: at 1e7 events
a 3 GB heap has silver's aggregation fail to get memory pages and spill.
The last line is ``build_seconds_ratio=<last variant / first>`` (medians over the rounds).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.measure import load_average

_RESULT = "RESULT "


def _write_bronze(base: Path, events: int, partitions: int) -> float:
    from bench.lakehouse_scale import append_bronze
    from ingest.paths import LakehousePaths
    from ingest.spark import spark_session
    from replicator.config import SparkConfig

    spark = spark_session(SparkConfig(master="local[2]"), app_name="bench-driver-memory-bronze")
    try:
        return append_bronze(spark, LakehousePaths(base.resolve()), 0, events, partitions, partitions)
    finally:
        spark.stop()


def _build_once(memory: str, master: str, base: Path, root: Path) -> None:
    """One build in this process: silver and gold from a hard-linked copy of ``base``'s bronze."""
    from bench.lakehouse_scale import StageClock, lakehouse_config
    from ingest.paths import LakehousePaths
    from ingest.spark import spark_session
    from lakehouse.build import refresh
    from replicator.config import SparkConfig

    spark = spark_session(SparkConfig(master=master, conf={"spark.driver.memory": memory}), app_name="bench-dm")
    paths = LakehousePaths(root.resolve())
    Path(paths.bronze).parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-al", str(LakehousePaths(base.resolve()).bronze), str(paths.bronze)], check=True)
    config = lakehouse_config(root)
    stages = StageClock()
    began = time.monotonic()
    refresh(spark, config, paths, on_stage=stages.stage)
    took = time.monotonic() - began
    stages.stage("")
    print(f"{_RESULT}{took:.3f} {stages}", flush=True)
    spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--memory", default="3g,4g", help="spark.driver.memory values, comma separated")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--one", nargs=3, metavar=("MEMORY", "BASE", "ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        _build_once(args.one[0], args.master, Path(args.one[1]), Path(args.one[2]))
        return

    variants = args.memory.split(",")
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="driver-memory-"))
    print(
        f"# driver_memory: {args.events} events, {args.partitions} partitions, heaps {variants}, "
        f"{args.rounds} rounds, master {args.master}, load {load_average()}",
        flush=True,
    )
    base = work / "base"
    print(f"bronze written in {_write_bronze(base, args.events, args.partitions):.1f} s", flush=True)
    seconds: dict[str, list[float]] = {v: [] for v in variants}
    for round_no in range(args.rounds):
        for memory in variants:
            root = work / f"r{round_no}-{memory}"
            done = subprocess.run(
                [sys.executable, "-m", "bench.driver_memory", "--master", args.master, "--one", memory, str(base),
                 str(root)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            line = next(x for x in done.stdout.splitlines() if x.startswith(_RESULT))
            took, stages = line[len(_RESULT) :].split(" ", 1)
            seconds[memory].append(float(took))
            print(
                f"round {round_no} heap {memory:>4}: silver+gold {float(took):7.1f} s "
                f"({args.events / float(took):,.0f} events/s); {stages}; load {load_average()}",
                flush=True,
            )
            shutil.rmtree(root)
    medians = {m: statistics.median(s) for m, s in seconds.items()}
    for memory, median in medians.items():
        print(f"median heap {memory:>4}: {median:7.1f} s ({args.events / median:,.0f} events/s)")
    print(f"build_seconds_ratio={medians[variants[-1]] / medians[variants[0]]:.3f}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
