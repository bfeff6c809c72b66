"""Benchmark: mirrorlake's copy rate under variants, interleaved on the same brokers in one run.

Where ``replicate_vs_mm2`` compares mirrorlake with MM2, this one answers "what does X cost the copy
loop?": it starts two local clusters once and, for ``--rounds`` rounds, runs raw produce-only and
each variant in turn on a freshly filled topic, so every variant sees the same brokers and (over the
rounds) the same background load. Variants:

- ``full``: the flow as it runs in production (state tasks beside the copy loop; audits off, as in
  ``replicate_vs_mm2``);
- ``no-tasks``: no state tasks at all (the copy loop alone);
- ``no-<task>``: every state task but one (``no-watermarks``, ``no-checkpoints``, ``no-config_snapshots``);
- ``procs<N>``: ``full`` with N replicator processes sharing the flow's consumer group;
- ``--tree NAME=PATH`` adds a variant ``NAME``: ``mirrorlake replicate --until-caught-up`` run as a
  child process from the source tree at PATH (for example a ``git worktree`` of an older commit, or
  ``.`` for this one), for a before/after in one run. Compare trees with trees: a variant run inside
  the bench's own process copied 10-15% slower than the same code as a child.

    .venv/bin/python -m bench.copy_variants --records 300000 --sizes 1024 --variants full no-tasks

The last lines give each variant's median records/s over the rounds and its ratio to raw produce-only
and to the first variant.
"""

from __future__ import annotations

import argparse
import gc
import logging
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import yaml

if __package__ in (None, ""):  # run as a file: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.measure import ArrivalWatcher, Span, load_average, self_cpu
from bench.ml_processes import config_document
from bench.replicate_vs_mm2 import Bench, cluster_config, environment, start_bench
from bench.workload import RecordSpec, drop_topics, fast_dir, prefill, raw_produce
from mirrorlake.localkafka import down, resolve_kafka_jars
from replicator.config import MirrorlakeConfig
from replicator.config.cache import cache_root
from replicator.flow import runtime as runtime_module
from replicator.flow.runtime import Replicator
from replicator.tasks.base import StateTasks
from replicator.tasks.flow_tasks import flow_state_tasks

_log = logging.getLogger("bench.copy_variants")


def _tasks_without(names: set[str] | None) -> Callable[..., StateTasks]:
    """``flow_state_tasks`` with the named tasks left out (``None``: all of them)."""

    def build(*args: Any, **kwargs: Any) -> StateTasks:
        tasks = flow_state_tasks(*args, **kwargs)
        tasks.tasks = [t for t in tasks.tasks if names is not None and t.name not in names]
        return tasks

    return build


def _run_replicator(config: MirrorlakeConfig, replicator_id: str) -> None:
    Replicator(config.model_copy(update={"replicator_id": replicator_id}), flows=["S->T"]).run_until_caught_up()


def run_variant(bench: Bench, spec: RecordSpec, topic: str, variant: str) -> Span:
    config = bench.flow_config([topic])
    remote = f"S.{topic}"
    original = runtime_module.FlowRunner
    if variant.startswith("no-"):  # the Replicator's runners get a task factory without some tasks
        leave_out = None if variant == "no-tasks" else {variant[3:]}
        runtime_module.FlowRunner = partial(original, state_tasks=_tasks_without(leave_out))  # type: ignore[misc]
    processes = int(variant[5:]) if variant.startswith("procs") else 1
    brokers = bench.broker_cpu()
    span = Span.begin(lambda: self_cpu() + brokers(), bench.foreign())
    watcher = ArrivalWatcher(bench.target, remote, spec.partitions, spec.count, span).start()
    try:
        tree = dict(t.split("=", 1) for t in bench.args.tree).get(variant)
        if tree is not None:  # the tree's own `mirrorlake replicate`, as a user runs it
            path = bench.work_dir / f"{variant}-{topic}.yaml"
            data = config_document(config)
            path.write_text(yaml.safe_dump(data), encoding="utf-8")
            subprocess.run(
                [sys.executable, "-m", "mirrorlake.cli", "replicate", str(path), "--until-caught-up"],
                cwd=tree, env={**os.environ, "PYTHONPATH": tree}, check=True, stdout=subprocess.DEVNULL,
            )  # fmt: skip
        elif processes == 1:
            Replicator(config, flows=["S->T"]).run_until_caught_up()
        else:
            ctx = multiprocessing.get_context("spawn")
            procs = [ctx.Process(target=_run_replicator, args=(config, f"bench-{i}")) for i in range(processes)]
            for p in procs:
                p.start()
            for p in procs:
                p.join()
        span.mark_end()
        if not watcher.wait(60):
            raise RuntimeError(f"{variant}: only {watcher.landed} of {spec.count} records on {remote}")
    finally:
        watcher.stop()
        runtime_module.FlowRunner = original  # type: ignore[misc]
    return span


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", nargs="+", default=["full", "no-tasks"])
    parser.add_argument("--no-raw", action="store_true", help="skip raw produce-only")
    parser.add_argument("--tree", action="append", default=[], help="NAME=PATH: a variant run from another tree")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("replicator").setLevel(logging.WARNING)
    logging.getLogger("replicator.librdkafka").setLevel(logging.ERROR)
    work_dir = Path(tempfile.mkdtemp(prefix="bench-copy-variants-", dir=fast_dir()))
    clusters = cluster_config(work_dir)
    lib_dir = resolve_kafka_jars(clusters.local_kafka.version, cache_root())
    results: dict[tuple[int, str], list[tuple[float, float, float, float]]] = {}
    load_before = load_average()
    try:
        bench = start_bench(args, work_dir, clusters, lib_dir)
        for rnd in range(args.rounds):
            for size in args.sizes:
                spec = RecordSpec(args.records, size, args.partitions)
                names = args.variants if args.no_raw else ["raw-produce", *args.variants]
                # rotate the order each round, so no variant always runs first (a cold cache) or last
                names = names[rnd % len(names) :] + names[: rnd % len(names)]
                for name in names:
                    gc.collect()
                    brokers = bench.broker_cpu()
                    brokers_before = brokers()
                    if name == "raw-produce":
                        span = raw_produce(
                            bench.target, bench.topic("raw", size, rnd), spec, lambda b=brokers: self_cpu() + b(),
                            bench.foreign(),
                        )  # fmt: skip
                        drop_topics(bench.target, [bench.topic("raw", size, rnd)])
                    else:
                        topic = bench.topic(name, size, rnd)
                        prefill(bench.source, topic, spec)
                        gc.collect()
                        time.sleep(1)  # let the prefill's flush settle on the brokers
                        span = run_variant(bench, spec, topic, name)
                        drop_topics(bench.source, [topic])
                        drop_topics(bench.target, [f"S.{topic}"])
                    brokers_us = 1e6 * (brokers() - brokers_before) / spec.count
                    rate = span.copy_records / span.copy_seconds
                    self_us = 1e6 * span.copy_cpu / span.copy_records
                    other = 100 * span.foreign_cpu / (span.copy_seconds * len(os.sched_getaffinity(0)))
                    _log.info(
                        "round %d %s %d B: %.0f rec/s, CPU us/rec: window %.1f, brokers/run %.1f (other %.0f%%)",
                        rnd, name, size, rate, self_us, brokers_us, other,
                    )  # fmt: skip
                    results.setdefault((size, name), []).append((rate, other, self_us, brokers_us))
    finally:
        down(clusters)
        shutil.rmtree(work_dir, ignore_errors=True)
    print()
    print("\n".join(environment(clusters)))
    print(f"load average at start {load_before}, at end {load_average()}")
    print(f"records per run: {args.records:_}, partitions: {args.partitions}, rounds: {args.rounds}")
    print()
    for size in args.sizes:
        base = [run[0] for run in results.get((size, "raw-produce"), [])]
        first = [run[0] for run in results[(size, args.variants[0])]]
        for (s, name), runs in results.items():
            if s != size:
                continue
            med = statistics.median(run[0] for run in runs)
            self_us = statistics.median(run[2] for run in runs)
            brokers_us = statistics.median(run[3] for run in runs)
            line = (
                f"{size:>5} B {name:<16} median {med:>9,.0f} rec/s, CPU us/rec window {self_us:5.1f} "
                f"brokers/run {brokers_us:5.1f}  runs " + " ".join(f"{r[0]:,.0f}({r[1]:.0f}%)" for r in runs)
            )
            if base:
                line += f"  /raw-produce {med / statistics.median(base):.2f}"
            line += f"  /{args.variants[0]} {med / statistics.median(first):.2f}"
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
