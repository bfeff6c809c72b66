"""Benchmark: mirrorlake vs MirrorMaker 2 vs the raw copy limit, side by side on the same brokers.

Starts two local KRaft clusters S and T (``mirrorlake.localkafka``), and for 100 B and 1 KiB
records measures: consume-only and produce-only rates of the brokers (the raw limit), mirrorlake
(``Replicator.run_until_caught_up`` on a fresh topic), and Apache Kafka's MirrorMaker 2 (dedicated
mode, same Kafka version, ``tasks.max=1`` and ``tasks.max=<partitions>``). Each run copies a
freshly filled topic from scratch. End-to-end latency is measured on a separate, lightly loaded
topic while the replicator under test runs. The clusters and every MM2 JVM are stopped at the end,
also on failure. See bench/README.md for what each number means.

    .venv/bin/python -m bench.replicate_vs_mm2 --records 20000

The last line is ``throughput_ratio_vs_mm2=<mirrorlake / MM2 (tasks.max=1) records/s, 1 KiB>``.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import confluent_kafka

from bench.measure import (
    ArrivalWatcher,
    CpuClock,
    Latency,
    Span,
    end_offset_total,
    foreign_cpu,
    load_average,
    measure_latency,
    processes_cpu,
    self_cpu,
)
from bench.ml_processes import MirrorlakeProcesses, config_document
from bench.mm2 import MirrorMaker2, Mm2Settings
from bench.native_floor import NativeCopy, build_native_copy
from bench.report import NOISY_PCT, Row, format_table, machine_bound_lines, ratio_lines
from bench.workload import (
    RecordSpec,
    create_topic,
    drop_topics,
    fast_dir,
    prefill,
    raw_consume,
    raw_produce,
    wait_deleted,
)
from mirrorlake.localkafka import LocalBroker, down, require_java, resolve_kafka_jars, up
from mirrorlake.localkafka.ports import find_free_port_pair
from replicator.client.policy import policy_from_config
from replicator.config import MirrorlakeConfig, parse_config
from replicator.config.cache import cache_root

_log = logging.getLogger("bench.replicate_vs_mm2")

_SIZES = (100, 1024)
_STEADY = 0.15  # a warm-up round's broker CPU within this of the round before: the broker is warm
_MIN_ROUNDS = 4  # ... but not before this round: a fresh broker's curve can flatten for a round early on


@dataclass(frozen=True)
class Bench:
    """Everything the runs share: clusters, jars, options, and a run id for fresh topic names."""

    args: argparse.Namespace
    work_dir: Path
    clusters: MirrorlakeConfig
    source: str
    target: str
    lib_dir: Path
    run_id: str
    brokers: list[LocalBroker]
    native_exe: Path | None = None

    def foreign(self, *extra_pids: int) -> CpuClock:
        """CPU of every process but this one, our brokers and ``extra_pids`` (e.g. the MM2 JVM)."""

        return foreign_cpu(lambda: self.broker_pids() + list(extra_pids))

    def settle(self) -> None:
        """Before a measurement: let the brokers finish deleting earlier runs' topics."""
        waited = wait_deleted([b.data_dir for b in self.brokers])
        if waited > 0.5:
            _log.info("waited %.1f s for the brokers to delete earlier runs' files", waited)

    def broker_pids(self) -> list[int]:
        return [pid for pid in (b.pid() for b in self.brokers) if pid is not None]

    def broker_cpu(self) -> CpuClock:
        """The brokers' CPU seconds: what a run costs the machine beside its own process."""
        return processes_cpu(self.broker_pids)

    def topic(self, *parts: object) -> str:
        return "-".join(["bench", self.run_id, *map(str, parts)])

    def flow_config(self, topics: list[str], copy_engine: str = "auto") -> MirrorlakeConfig:
        return flow_config(self.clusters, topics, copy_engine)

    def latency(self, source_topic: str, target_topic: str, value_size: int) -> Latency:
        return measure_latency(
            self.source,
            self.target,
            source_topic,
            target_topic,
            partitions=self.args.partitions,
            value_size=value_size,
            count=self.args.latency_records,
            rate=self.args.latency_rate,
        )


# -- runs -------------------------------------------------------------------------------------


def run_raw(bench: Bench, spec: RecordSpec, source_topic: str) -> list[Row]:
    """Consume-only from ``source_topic`` on S; produce-only (without and with callbacks) to T."""
    size = spec.value_size
    bench.settle()
    rows = [
        Row(
            "raw consume-only (S)",
            "raw-consume",
            spec.label,
            spec.record_bytes,
            raw_consume(bench.source, source_topic, spec, self_cpu, bench.foreign(), bench.broker_cpu()),
        )
    ]
    bench.settle()
    span = raw_produce(bench.target, bench.topic("raw", size), spec, self_cpu, bench.foreign(), bench.broker_cpu())
    rows.append(Row("raw produce-only (T)", "raw-produce", spec.label, spec.record_bytes, span))
    bench.settle()
    span = raw_produce(
        bench.target,
        bench.topic("rawcb", size),
        spec,
        self_cpu,
        bench.foreign(),
        bench.broker_cpu(),
        per_record_callback=True,
    )
    rows.append(Row("raw produce-only + per-rec callback", "raw-produce-cb", spec.label, spec.record_bytes, span))
    drop_topics(bench.target, [bench.topic("raw", size), bench.topic("rawcb", size)])
    for row in rows:
        _log.info("%s %s: %.0f records/s", row.name, row.size_label, row.records_per_s)
    return rows


def run_mirrorlake(bench: Bench, spec: RecordSpec, topic: str, processes: int, copy_engine: str = "auto") -> Row:
    """``processes`` ``mirrorlake replicate --until-caught-up`` processes of a flow selecting exactly
    ``topic``; then latency on its own topic, through one process running until SIGTERM.
    ``copy_engine`` python: the same code with its pure-Python produce path (row kind mirrorlake-py)."""
    config = bench.flow_config([topic], copy_engine)
    remote = policy_from_config(config.replication_policy).format_remote_topic("S", topic)
    name, kind = (
        ("mirrorlake", "mirrorlake") if processes == 1 else (f"mirrorlake x{processes}", f"mirrorlake-p{processes}")
    )
    if copy_engine == "python":
        name, kind = f"{name} (Python path)", f"{kind}-py"
    run_dir = bench.work_dir / f"{kind}-{spec.value_size}"
    bench.settle()
    replicators = MirrorlakeProcesses(config, run_dir, processes, until_caught_up=True).start()
    span = Span.begin(replicators.cpu, bench.foreign(*replicators.pids()), bench.broker_cpu())
    watcher = ArrivalWatcher(bench.target, remote, spec.partitions, spec.count, span).start()
    try:
        if not watcher.wait(bench.args.timeout, alive=replicators.alive):
            raise RuntimeError(f"{name}: only {watcher.landed} of {spec.count} records on {remote} (logs: {run_dir})")
        replicators.wait(bench.args.timeout)
        span.mark_end()
    finally:
        watcher.stop()
        replicators.stop()
    _log.info("%s %s: all records landed %.1f s after launch", name, spec.label, span.wall_seconds)
    _check_count(bench, remote, spec)
    drop_topics(bench.target, [remote])

    latency = probe_mirrorlake(bench, kind, spec.value_size, copy_engine, run_dir) if processes == 1 else None
    return Row(name, kind, spec.label, spec.record_bytes, span, latency)


def probe_mirrorlake(bench: Bench, kind: str, value_size: int, copy_engine: str, run_dir: Path) -> Latency:
    """The latency probe through one ``mirrorlake replicate`` running until SIGTERM, on a topic of
    its own (sizes and contenders may repeat: a fresh topic is a fresh group position)."""
    lat_topic = bench.topic("lat", kind, value_size, uuid.uuid4().hex[:6])
    create_topic(bench.source, lat_topic, bench.args.partitions)
    lat_config = bench.flow_config([lat_topic], copy_engine)
    serving = MirrorlakeProcesses(lat_config, run_dir / f"latency-{lat_topic}", 1, until_caught_up=False).start()
    try:
        return bench.latency(lat_topic, f"S.{lat_topic}", value_size)
    finally:
        serving.stop()


def run_mm2(bench: Bench, spec: RecordSpec, topic: str, settings: Mm2Settings) -> Row:
    """One MM2 JVM copying ``topic`` (and a latency topic); timed until all records are on T."""
    lat_topic = bench.topic("lat", f"mm2t{settings.tasks_max}", spec.value_size)
    create_topic(bench.source, lat_topic, spec.partitions)
    mm2 = MirrorMaker2(
        java=require_java(),
        lib_dir=bench.lib_dir,
        work_dir=bench.work_dir / f"mm2-{spec.value_size}-t{settings.tasks_max}",
        source=bench.source,
        target=bench.target,
        topics=[topic, lat_topic],
        settings=settings,
    )
    remote = mm2.remote_topic(topic)
    watcher: ArrivalWatcher | None = None
    try:
        bench.settle()
        mm2.start()
        span = Span.begin(mm2.cpu_clock(), bench.foreign(mm2.pid), bench.broker_cpu())
        watcher = ArrivalWatcher(bench.target, remote, spec.partitions, spec.count, span).start()
        if not watcher.wait(bench.args.timeout, alive=mm2.alive):
            state = "exited" if not mm2.alive() else f"timed out after {bench.args.timeout:g} s"
            raise RuntimeError(
                f"MM2 {state} with {watcher.landed} of {spec.count} records on {remote}\n{mm2.log_tail()}"
            )
        _log.info(
            "MM2 tasks.max=%d %s: all records landed %.1f s after launch",
            settings.tasks_max,
            spec.label,
            span.wall_seconds,
        )
        latency = bench.latency(lat_topic, mm2.remote_topic(lat_topic), spec.value_size)
    finally:
        if watcher is not None:
            watcher.stop()
        mm2.stop()
    _check_count(bench, remote, spec)
    name = f"MM2 tasks.max={settings.tasks_max}" + ("" if settings.tuned_producer else " (Connect defaults)")
    return Row(name, f"mm2-t{settings.tasks_max}", spec.label, spec.record_bytes, span, latency)


def run_native(bench: Bench, spec: RecordSpec, topic: str) -> Row:
    """``native_copy`` (``bench.native_floor``): the same copy with no Python, to the same kind of topic."""
    assert bench.native_exe is not None
    remote = f"S.{topic}"
    create_topic(bench.target, remote, spec.partitions)
    bench.settle()
    copy = NativeCopy(
        bench.native_exe,
        bench.source,
        topic,
        bench.target,
        remote,
        spec.partitions,
        spec.count,
        bench.work_dir / f"native-{spec.value_size}.log",
    ).start()
    span = Span.begin(copy.cpu, bench.foreign(copy.pid), bench.broker_cpu())
    watcher = ArrivalWatcher(bench.target, remote, spec.partitions, spec.count, span).start()
    try:
        if not watcher.wait(bench.args.timeout, alive=copy.alive):
            raise RuntimeError(f"native copy: only {watcher.landed} of {spec.count} records on {remote}")
        span.mark_end()
        report = copy.wait(bench.args.timeout)
    finally:
        watcher.stop()
        copy.stop()
    _log.info("native copy %s: %s", spec.label, report)
    _check_count(bench, remote, spec)
    drop_topics(bench.target, [remote])
    return Row("native floor (C, not mirrorlake)", "native", spec.label, spec.record_bytes, span)


def _check_count(bench: Bench, remote: str, spec: RecordSpec) -> None:
    landed = end_offset_total(bench.target, remote, spec.partitions)
    if landed != spec.count:
        _log.warning("%s has %d records for %d source records (duplicates from a replay?)", remote, landed, spec.count)


def warm_up(bench: Bench) -> None:
    """Run every broker path the contenders use before anything is measured, until the brokers are
    steady, and measure nothing.

    Brokers are fresh JVMs: their request paths start interpreted and their heaps small. Without
    this, whatever ran first paid for it (2026-11-25, the same code: raw produce-only 1 KiB made
    176k records/s as the first run and 350k as a later one; mirrorlake 100 B 262k and p99 101 ms
    first, 387k and 6 ms second). One round of produce-only and consume-only runs was not enough:
    on 2026-11-26 a fresh broker's CPU for the same 1,000,000 produced records of 1 KiB fell from
    8.5 s to 1.2 s over six runs (``bench/results/broker_warm_up-2026-11-26.txt``). So per cluster,
    rounds of a produce-only and a consume-only run of ``--warm-up-records`` records per size
    repeat until a round's broker CPU is within ``_STEADY`` of the round before, from round
    ``_MIN_ROUNDS`` on (at most ``--warm-up-rounds``); then a probe of small unbatched requests
    (produce, then fetch on the same broker) per size.
    """
    args = bench.args
    brokers = {b.alias: b for b in bench.brokers}
    for alias, bootstrap in (("S", bench.source), ("T", bench.target)):
        broker_cpu = processes_cpu(lambda b=brokers[alias]: [pid] if (pid := b.pid()) is not None else [])
        previous: float | None = None
        for round_ in range(1, args.warm_up_rounds + 1):
            before, rates = broker_cpu(), []
            for value_size in args.sizes:
                spec = RecordSpec(args.warm_up_records, value_size, args.partitions)
                topic = bench.topic("warm", alias, round_, value_size)
                produced = raw_produce(bootstrap, topic, spec, self_cpu, bench.foreign())
                consumed = raw_consume(bootstrap, topic, spec, self_cpu, bench.foreign())
                drop_topics(bootstrap, [topic, f"{topic}-warmup"])
                bench.settle()
                rates.append(
                    f"{spec.label} produce {produced.copy_records / produced.copy_seconds:.0f}, "
                    f"consume {consumed.copy_records / consumed.copy_seconds:.0f} records/s"
                )
            used = broker_cpu() - before
            _log.info(
                "warm-up %s round %d (not measured): broker CPU %.1f s; %s", alias, round_, used, "; ".join(rates)
            )
            if round_ >= _MIN_ROUNDS and previous is not None and abs(used - previous) <= _STEADY * previous:
                break
            previous = used
        else:
            _log.warning("warm-up %s: the broker's CPU per round still moved after %d rounds", alias, round_)
        for value_size in args.sizes:
            probe = bench.topic("warm-lat", alias, value_size)
            create_topic(bootstrap, probe, args.partitions)
            measure_latency(
                bootstrap, bootstrap, probe, probe, partitions=args.partitions, value_size=value_size,
                count=args.latency_records, rate=args.latency_rate * 4,
            )  # fmt: skip
            drop_topics(bootstrap, [probe])
    _warm_up_replicator(bench)


def _warm_up_replicator(bench: Bench) -> None:
    """A throwaway ``mirrorlake replicate`` copy per size, not measured: the brokers' paths that only
    a replicator uses (its consumer group and commits, the state topic, offset syncs) compiled
    before the first measured copy. Without it, of two back-to-back mirrorlake runs at 100 B after
    the broker warm-up, the first made 154k records/s at 61.7 CPU s/GB with the brokers at 3.4 s,
    the second 235k at 45.3 with 1.6 s; with this copy first, 198k and 241k, the brokers at 1.6 and 0.9 s
    (2026-11-26, ``results/replicate_vs_mm2-2026-11-26-back-to-back.txt``).

    Then a latency probe through a replicator, not counted: the first measured probe, always
    mirrorlake's compiled path, had a 100 B p99 of 72.0 ms where the Python path's, probed next,
    had 5.5 (``results/replicate_vs_mm2-2026-11-27-run6-8d7aaac.txt``), and on fresh brokers the
    first probe of either warm-up was slowest (p50 34 and 7 ms, then 2-3 ms).
    """
    args = bench.args
    for value_size in args.sizes:
        spec = RecordSpec(args.warm_up_records, value_size, args.partitions)
        topic = bench.topic("warm-ml", value_size)
        prefill(bench.source, topic, spec)
        config = bench.flow_config([topic])
        replicator = MirrorlakeProcesses(config, bench.work_dir / f"warm-ml-{value_size}", 1, until_caught_up=True)
        started = time.monotonic()
        try:
            replicator.start().wait(args.timeout)
        finally:
            replicator.stop()
        remote = policy_from_config(config.replication_policy).format_remote_topic("S", topic)
        drop_topics(bench.source, [topic])
        drop_topics(bench.target, [remote])
        latency = probe_mirrorlake(bench, "warm-ml", value_size, "auto", bench.work_dir / f"warm-ml-{value_size}")
        bench.settle()
        _log.info(
            "warm-up mirrorlake %s (not measured): %.1f s; latency probe %s",
            spec.label,
            time.monotonic() - started,
            latency.summary(),
        )


def run_size(bench: Bench, value_size: int) -> list[Row]:
    args = bench.args
    spec = RecordSpec(args.records, value_size, args.partitions)
    ml_topic = bench.topic("ml", value_size)
    prefill(bench.source, ml_topic, spec)
    gc.collect()  # clients and closures of earlier runs go now, not during a measurement
    rows = run_raw(bench, spec, ml_topic)
    gc.collect()
    for processes in args.processes:  # a fresh topic each: the flow's group has committed the last one
        topic = ml_topic if processes == args.processes[0] else bench.topic(f"ml{processes}", value_size)
        if topic != ml_topic:
            prefill(bench.source, topic, spec)
        gc.collect()
        rows.append(run_mirrorlake(bench, spec, topic, processes))
        if topic != ml_topic:
            drop_topics(bench.source, [topic])
    if args.python_path:
        topic = bench.topic("mlpy", value_size)
        prefill(bench.source, topic, spec)
        gc.collect()
        rows.append(run_mirrorlake(bench, spec, topic, 1, copy_engine="python"))
        drop_topics(bench.source, [topic])
    if args.native:
        topic = bench.topic("native", value_size)
        prefill(bench.source, topic, spec)
        gc.collect()
        rows.append(run_native(bench, spec, topic))
        drop_topics(bench.source, [topic])
    for tasks in args.mm2_tasks:
        topic = bench.topic(f"mm2t{tasks}", value_size)
        prefill(bench.source, topic, spec)
        gc.collect()
        rows.append(run_mm2(bench, spec, topic, Mm2Settings(tasks_max=tasks, tuned_producer=not args.mm2_defaults)))
        drop_topics(bench.source, [topic])
    drop_topics(bench.source, [ml_topic])
    return rows


# -- set-up -----------------------------------------------------------------------------------


def start_bench(args: argparse.Namespace, work_dir: Path, clusters: MirrorlakeConfig, lib_dir: Path) -> Bench:
    """Start the clusters S and T of ``cluster_config`` (the caller stops them with ``down``)."""
    return Bench(
        brokers=up(clusters),
        args=args,
        work_dir=work_dir,
        clusters=clusters,
        source=clusters.cluster("S").bootstrap_servers,
        target=clusters.cluster("T").bootstrap_servers,
        lib_dir=lib_dir,
        run_id=uuid.uuid4().hex[:6],
        native_exe=build_native_copy(cache_root() / "bench") if args.native else None,
    )


def flow_config(
    clusters: MirrorlakeConfig,
    topics: list[str],
    copy_engine: str = "auto",
    target_client: Mapping[str, str] | None = None,
) -> MirrorlakeConfig:
    """The benches' flow S->T of ``topics`` on ``clusters`` (``cluster_config``);
    ``target_client``: librdkafka settings of cluster T."""
    data = config_document(clusters)
    if target_client:
        data["clusters"]["T"]["client"] = dict(target_client)
    # audits re-read both sides (MM2 has nothing like them): off, so both copy the same work;
    # checkpoints, heartbeats, watermarks and snapshots stay on, as MM2's connectors do
    data["flows"] = [{"source": "S", "target": "T", "topics": topics, "audit": False, "copy_engine": copy_engine}]
    return parse_config(data, source="bench")


def cluster_config(work_dir: Path) -> MirrorlakeConfig:
    source_port = find_free_port_pair(set())
    target_port = find_free_port_pair({source_port, source_port + 1})
    return parse_config(
        {
            "clusters": {
                "S": {"bootstrap_servers": f"127.0.0.1:{source_port}"},
                "T": {"bootstrap_servers": f"127.0.0.1:{target_port}"},
            },
            "local_kafka": {"work_dir": str(work_dir / "clusters")},
        },
        source="bench/replicate_vs_mm2.py",
    )


def environment(config: MirrorlakeConfig) -> list[str]:
    repo = Path(__file__).resolve().parent.parent
    git = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    ).stdout.strip()
    return [
        f"date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        f"mirrorlake: git {git.stdout.strip() or '?'}{' (uncommitted changes)' if dirty else ''}",
        f"kafka: {config.local_kafka.version} (brokers -Xmx{config.local_kafka.heap}); "
        f"confluent-kafka {confluent_kafka.version()}, librdkafka {confluent_kafka.libversion()[0]}; "
        f"python {platform.python_version()}; {_cpu_count()} CPUs",
    ]


def _cpu_count() -> int:
    return len(os.sched_getaffinity(0))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=1_000_000, help="records per run (default 1,000,000)")
    parser.add_argument("--partitions", type=int, default=6, help="partitions per topic (default 6)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(_SIZES), help="value sizes in bytes")
    parser.add_argument(
        "--mm2-tasks",
        type=int,
        nargs="+",
        default=None,
        help="MM2 tasks.max values to run (default: 1 and the partition count)",
    )
    parser.add_argument("--no-mm2", action="store_true", help="skip MirrorMaker 2 (mirrorlake and raw limits only)")
    parser.add_argument(
        "--processes", type=int, nargs="+", default=[1], help="mirrorlake processes per flow to run (default 1)"
    )
    parser.add_argument(
        "--mm2-defaults",
        action="store_true",
        help="run MM2 with Connect's producer defaults instead of the replicator's batching",
    )
    parser.add_argument(
        "--native",
        action="store_true",
        help="also run bench/native_copy.c, the same copy in C with no Python (needs gcc and librdkafka-dev)",
    )
    parser.add_argument(
        "--python-path",
        action="store_true",
        help="also run mirrorlake with copy_engine: python (its pure-Python produce path), side by side",
    )
    parser.add_argument("--latency-records", type=int, default=2000, help="records per latency probe")
    parser.add_argument("--latency-rate", type=float, default=500.0, help="records/s of the latency probe")
    parser.add_argument(
        "--warm-up-records",
        type=int,
        default=1_000_000,
        help="records per size and cluster sent through the brokers before measuring (0: no warm-up)",
    )
    parser.add_argument(
        "--warm-up-rounds",
        type=int,
        default=8,
        help="most warm-up rounds per cluster; they stop once a round's broker CPU is steady",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="give up on an MM2 run after this many s")
    parser.add_argument("--work-dir", type=Path, help="cluster data and logs (default: a new temp dir)")
    parser.add_argument("--keep-work-dir", action="store_true", help="keep data and logs (deleted by default)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.no_mm2:
        args.mm2_tasks = []
    elif args.mm2_tasks is None:
        args.mm2_tasks = sorted({1, args.partitions})
    if args.warm_up_records < 0:
        parser.error("--warm-up-records must be 0 or more")
    if args.warm_up_rounds < 1:
        parser.error("--warm-up-rounds must be 1 or more")
    if args.records < 1 or args.partitions < 1:
        parser.error("--records and --partitions must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("replicator.librdkafka").setLevel(logging.WARNING)
    work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-replicate-vs-mm2-", dir=fast_dir()))
    work_dir.mkdir(parents=True, exist_ok=True)
    clusters = cluster_config(work_dir)
    lib_dir = resolve_kafka_jars(clusters.local_kafka.version, cache_root())
    rows: list[Row] = []
    load_before = load_average(2)
    try:
        bench = start_bench(args, work_dir, clusters, lib_dir)
        if args.warm_up_records:
            warm_up(bench)
        for size in args.sizes:
            rows.extend(run_size(bench, size))
    finally:
        down(clusters)
        if args.keep_work_dir:
            _log.info("data and logs kept in %s", work_dir)
        else:
            shutil.rmtree(work_dir, ignore_errors=True)
    print_report(
        clusters, args, rows, load=f"load average (1/5/15 min) at start {load_before}, at end {load_average(2)}"
    )
    return 0


def print_report(clusters: MirrorlakeConfig, args: argparse.Namespace, rows: list[Row], *, load: str) -> None:
    print()
    print("\n".join(environment(clusters)))
    print(load)
    print(
        f"records per run: {args.records:_}, partitions: {args.partitions}, "
        f"latency probe: {args.latency_records} records at {args.latency_rate:g}/s"
    )
    print()
    print(format_table(rows))
    noisy = [f"{r.name} {r.size_label}" for r in rows if r.other_load_pct > NOISY_PCT]
    if noisy:
        print(f"* other processes used > {NOISY_PCT:g}% of the machine during: {', '.join(noisy)}; rerun when quiet")
    print()
    against = {"raw-produce": "raw-produce", "raw-consume": "raw-consume"}
    against.update({f"mm2-t{t}": f"MM2(tasks.max={t})" for t in args.mm2_tasks})
    print("\n".join(ratio_lines(rows, ours="mirrorlake", against=against)))
    print("\n".join(machine_bound_lines(rows, ours="mirrorlake", limit="raw-produce")))
    if args.python_path:
        print(
            "\n".join(
                ratio_lines(
                    rows, ours="mirrorlake-py", against={"raw-produce": "raw-produce", "mirrorlake": "mirrorlake"}
                )
            )
        )
    if args.native:
        print(
            "\n".join(
                ratio_lines(rows, ours="native", against={"raw-produce": "raw-produce", "mirrorlake": "mirrorlake"})
            )
        )
        print("\n".join(machine_bound_lines(rows, ours="native", limit="raw-produce")))
    for processes in args.processes:
        if processes > 1:
            kind = f"mirrorlake-p{processes}"
            print("\n".join(ratio_lines(rows, ours=kind, against={"mirrorlake": "mirrorlake", **against})))
    mine = next((r for r in rows if r.kind == "mirrorlake" and r.size_label == "1 KiB"), None)
    theirs = next((r for r in rows if r.kind == "mm2-t1" and r.size_label == "1 KiB"), None)
    if mine and theirs:
        print(f"throughput_ratio_vs_mm2={mine.records_per_s / theirs.records_per_s:.2f}")


if __name__ == "__main__":
    sys.exit(main())
