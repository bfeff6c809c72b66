"""How fresh the lakehouse is while ``lakehouse serve`` runs: state event emitted -> visible in gold.

Not a test: prints numbers measured side by side in one run (one broker, one Spark session, one
``LakehouseService``, the same settings for every rate).

Two local clusters S and T of its own; the state topic on T. A writer emits the state events of a
flow ``S->T`` at ``--rates`` events/s, each rate for ``--seconds``: per step and partition an
offset sync, a source and a target watermark and a checkpoint (``emitted_at_ms`` is the moment it
is handed to the producer). Meanwhile ``LakehouseService`` (what ``mirrorlake lakehouse serve``
runs: bronze, silver and gold every ``--interval``; Spark's bronze stream every ``--trigger``) keeps
the lakehouse up to date, and a reader asks gold through DuckDB (``mirrorlake sql``'s engine) every
``--poll`` seconds:

- a source watermark is visible when ``rpo`` holds it or a later one of its partition (its row, one
  per source watermark, or a higher ``log_end_offset``: the state topic has one partition, so
  bronze, silver and gold take events in the order written); after the run one full read of
  ``rpo`` counts the watermarks it never showed;
- a checkpoint is visible when ``group_offsets`` holds it or a later one of its group and partition
  (``as_of_ms`` >= its ``emitted_at_ms``): the table keeps the latest only.

The writer is a process of its own (as a replicator is) and a read of gold is two small aggregates,
so neither takes the interpreter from the service's decoding (in one process, as on 2026-12-01, the
writer's encoding and a reader fetching every id of ``rpo`` twice a second did).

Before the first rate, a warm-up at that rate until the service has refreshed ``--warmup`` times
(Spark's first queries compile their plans; not counted). Delay = the read that first saw it minus
its ``emitted_at_ms`` (so up to ``--poll`` late). Beside it, when an open dashboard shows the
event: its next rerun after a commit (``watch_as_the_dashboard``). For each
rate: p50, p99 and max per kind, and where the time went (the service's refreshes: silver, gold,
counting rows; the trigger and interval are waits). After the last rate the writer stops and every
emitted event must become visible within ``--settle`` seconds. All of it once per pair of engines
(``--engines <bronze>+<silver>``): bronze ``kafka`` (a consumer and a delta-rs append at each
refresh, as ``lakehouse serve`` runs) or ``spark`` (streams), silver ``auto`` (increments decoded
by delta-rs, as serve runs) or ``spark`` (every increment a Spark stream), each with a state topic
and a lakehouse of its own, one after the other in one run; the ratio of their p99 per rate, and
last ``freshness_p99_s_<bronze>_<silver>_<rate>=<value>``.

    .venv/bin/python -m bench.freshness                               # 1,000 and 10,000 events/s
    .venv/bin/python -m bench.freshness --rates 1000 --seconds 30     # a quick look
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import pickle
import random
import statistics
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.measure import load_average
from bench.replicate_vs_mm2 import cluster_config

_log = logging.getLogger("bench.freshness")
STATE_TOPIC = "mirrorlake.events"
FLOW, PARTITIONS, GROUPS = "S->T", 6, ("app-1", "app-2")
KINDS_PER_STEP = 4  # offset sync, source watermark, target watermark, checkpoint


@dataclass
class Emitted:
    """What the writer handed to the producer, in order (the state topic has one partition, so gold
    shows them in this order: an event is visible once a later one of its partition or group is)."""

    watermarks: dict[int, list[tuple[int, int, int]]] = field(
        default_factory=lambda: defaultdict(list)
    )  # partition -> [(log end offset, emitted ms, rate)]
    checkpoints: dict[tuple[str, int], list[tuple[int, int]]] = field(
        default_factory=lambda: defaultdict(list)
    )  # (group, partition) -> [(emitted ms, rate)]
    ids: list[str] = field(default_factory=list)  # every counted source watermark's event id
    count: dict[int, int] = field(default_factory=lambda: defaultdict(int))  # rate -> events


@dataclass
class Seen:
    """What each read of gold showed: when, and the newest source watermark and checkpoint there."""

    reads: list[tuple[int, dict[int, int], dict[tuple[str, int], int]]] = field(default_factory=list)
    missing: int = 0  # counted source watermarks not in gold at the end (one full read of rpo)


@dataclass
class StageTimes:
    """Seconds per stage of each refresh (``LakehouseService``'s ``on_stage``/``on_refresh``), by rate."""

    rate: int = 0
    per_rate: dict[int, list[dict[str, float]]] = field(default_factory=lambda: defaultdict(list))
    tables: dict[int, list[dict[str, float]]] = field(default_factory=lambda: defaultdict(list))  # gold, each
    _current: dict[str, float] = field(default_factory=dict)
    _stage: str = ""
    _at: float = 0.0

    def started(self, name: str) -> None:
        name = "gold (tables in parallel)" if name.startswith("gold ") else name
        if name == self._stage:
            return
        now = time.monotonic()
        if self._stage:
            self._current[self._stage] = self._current.get(self._stage, 0.0) + now - self._at
        self._stage, self._at = name, now

    def refreshed(self, report: Any) -> None:  # lakehouse.build.BuildReport
        self.started("")
        self.per_rate[self.rate].append(dict(self._current))
        self.tables[self.rate].append({u.table: u.seconds for u in report.gold_updates})
        self._current.clear()


def _step_events(step: int, partition: int):  # -> list[replicator.events.Event]
    from replicator.events import Checkpoint, OffsetSync, SyncReason, Watermark

    u = step * 10
    common: dict[str, Any] = {"flow": FLOW, "replicator_id": "bench-freshness"}
    pair: dict[str, Any] = {"source_cluster": "S", "target_cluster": "T", "source_topic": "orders"}
    pair["partition"] = partition
    now = int(time.time() * 1000)
    return [
        OffsetSync(**common, **pair, target_topic="S.orders", upstream_offset=u, downstream_offset=u,
                   upstream_timestamp_ms=now, reason=SyncReason.LAG_MAX,
                   previous_upstream_offset=u - 1 if step else None,
                   previous_downstream_offset=u - 1 if step else None),
        Watermark(**common, cluster="S", side="source", topic="orders", source_topic="orders", partition=partition,
                  log_start_offset=0, log_end_offset=u + 15, observed_at_ms=now, max_timestamp_ms=now),
        Watermark(**common, cluster="T", side="target", topic="S.orders", source_topic="orders",
                  partition=partition, log_start_offset=0, log_end_offset=u + 1, observed_at_ms=now,
                  max_timestamp_ms=now),
        Checkpoint(**common, **pair, group=GROUPS[step % len(GROUPS)], target_topic="S.orders",
                   upstream_offset=max(0, u - 5), downstream_offset=max(0, u - 5), method="exact"),
    ]  # fmt: skip


@dataclass(frozen=True)
class WriterControl:
    """Shared with the writer's process: the rate written, the rate counted (0: a warm-up), stop."""

    rate: Any  # multiprocessing.Value("i")
    tag: Any
    stop: Any  # multiprocessing.Event

    def set(self, rate: int, tag: int) -> None:
        self.rate.value, self.tag.value = rate, tag


def write_events(bootstrap: str, topic: str, control: WriterControl, out: Path) -> None:
    """The writer's process: ``control.rate`` events/s in 10 ms ticks until ``control.stop``; then
    what it emitted goes to ``out`` (pickled). A process of its own, as a replicator is: in the
    service's process its encoding took the interpreter from silver's decoding."""
    from confluent_kafka import Producer

    from replicator.events import Checkpoint, Watermark, encode

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    emitted = Emitted()
    owed, last, counter = 0.0, time.monotonic(), 0
    while not control.stop.is_set():
        now = time.monotonic()
        owed += control.rate.value * (now - last) / KINDS_PER_STEP  # steps owed, one per partition in turn
        last = now
        rate = control.tag.value
        while owed >= 1:
            owed -= 1
            partition, step = counter % PARTITIONS, counter // PARTITIONS
            counter += 1
            for event in _step_events(step, partition):
                value = encode(event)
                while True:
                    try:
                        producer.produce(topic, key=FLOW.encode(), value=value)
                        break
                    except BufferError:  # the local queue is full: let the broker catch up
                        producer.poll(0.05)
                emitted.count[rate] += 1
                if rate and isinstance(event, Watermark) and event.side == "source":
                    emitted.watermarks[partition].append((event.log_end_offset, event.emitted_at_ms, rate))
                    emitted.ids.append(event.event_id)
                elif rate and isinstance(event, Checkpoint):
                    emitted.checkpoints[(event.group, partition)].append((event.emitted_at_ms, rate))
        producer.poll(0)
        if not control.rate.value:
            owed = 0.0
        control.stop.wait(0.01)
    producer.flush(30)
    out.write_bytes(pickle.dumps(emitted))


def read_gold(root: Path, seen: Seen) -> None:
    """One read of gold: the newest source watermark per partition and checkpoint per group and
    partition (two small aggregates, so the reader takes little from the service it measures)."""
    from lakehouse.sql import LakehouseSQL, TableNotFoundError

    try:
        sql = LakehouseSQL(root)
    except TableNotFoundError:
        return  # the first build has not written gold yet
    try:
        if not {"rpo", "group_offsets"} <= set(sql.views):
            return
        marks = sql.query('SELECT "partition", max(log_end_offset) FROM rpo GROUP BY ALL').rows
        latest = sql.query('SELECT "group", "partition", max(as_of_ms) FROM group_offsets GROUP BY ALL').rows
    finally:
        sql.close()
    seen.reads.append((int(time.time() * 1000), dict(marks), {(g, p): t for g, p, t in latest}))


def watch_as_the_dashboard(root: Path, seen: Seen, stop: threading.Event) -> None:
    """When an open dashboard shows what gold holds: its auto-refresh (``dashboards.sidebar``) looks at
    the Delta logs every ``REFRESH_SECONDS`` and reruns the page when a table got a commit. Here the
    same check (``dashboards.timetravel.signature``), at the same interval from a random phase (a page
    opened at any moment), and on a change one read of gold, as the rerun page makes."""
    from dashboards.sidebar import REFRESH_SECONDS
    from dashboards.timetravel import signature
    from ingest.paths import LakehousePaths
    from lakehouse.catalog import table_paths

    tables = table_paths(LakehousePaths(root))
    last = signature(tables)
    stop.wait(random.uniform(0, REFRESH_SECONDS))
    while not stop.is_set():
        current = signature(tables)
        if current != last:
            last = current
            read_gold(root, seen)
        stop.wait(REFRESH_SECONDS)


def missing_watermarks(root: Path, emitted: Emitted) -> int:
    """Counted source watermarks that gold's ``rpo`` lacks (one full read, after the run)."""
    from lakehouse.sql import LakehouseSQL

    sql = LakehouseSQL(root)
    try:
        held = {r[0] for r in sql.query("SELECT watermark_event_id FROM rpo").rows}
    finally:
        sql.close()
    return sum(1 for i in emitted.ids if i not in held)


def delays(emitted: Emitted, seen: Seen) -> dict[tuple[str, int], list[float]]:
    """Each counted event's delay: the first read that showed it (or a later event of its partition
    or group) minus its emission; (kind, rate) -> seconds."""
    out: dict[tuple[str, int], list[float]] = defaultdict(list)
    for partition, sent in emitted.watermarks.items():
        i = 0
        for at_ms, marks, _c in seen.reads:
            while i < len(sent) and sent[i][0] <= marks.get(partition, -1):
                out[("watermark", sent[i][2])].append((at_ms - sent[i][1]) / 1000)
                i += 1
    for key, sent_c in emitted.checkpoints.items():
        i = 0
        for at_ms, _m, latest in seen.reads:
            while i < len(sent_c) and sent_c[i][0] <= latest.get(key, -1):
                out[("checkpoint", sent_c[i][1])].append((at_ms - sent_c[i][0]) / 1000)
                i += 1
    return out


def _all_seen(emitted: Emitted, seen: Seen) -> bool:
    if not seen.reads:
        return False
    _at, marks, latest = seen.reads[-1]
    return all(s[-1][0] <= marks.get(p, -1) for p, s in emitted.watermarks.items() if s) and all(
        s[-1][0] <= latest.get(k, -1) for k, s in emitted.checkpoints.items() if s
    )


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


@dataclass
class Measured:
    """One engine's run: what was written, what gold showed and when, where each refresh's time went."""

    silver: str
    emitted: Emitted = field(default_factory=Emitted)
    seen: Seen = field(default_factory=Seen)
    dashboard: Seen = field(default_factory=Seen)  # what a dashboard's reruns showed (``watch_as_the_dashboard``)
    stages: StageTimes = field(default_factory=StageTimes)
    phases: dict[int, tuple[int, int]] = field(default_factory=dict)  # rate -> (first, last) ms written
    bronze: dict[int, list[float]] = field(default_factory=dict)  # rate -> each row's wait for its batch


def bronze_waits(root: Path, phases: dict[int, tuple[int, int]]) -> dict[int, list[float]]:
    """Per rate, each bronze row's micro-batch start (``ingested_at``) minus its Kafka timestamp:
    what the trigger and the batches before it cost (the batch's own run then precedes its commit)."""
    import duckdb

    from ingest.paths import LakehousePaths
    from lakehouse.duck import delta

    con = duckdb.connect()
    try:
        con.register("bronze", delta.dataset(LakehousePaths(root).bronze))
        rows = con.execute(
            "SELECT epoch_ms(kafka_timestamp), (epoch_ms(ingested_at) - epoch_ms(kafka_timestamp)) / 1000.0 FROM bronze"
        ).fetchall()
    finally:
        con.close()
    return {rate: [w for t, w in rows if lo <= t <= hi] for rate, (lo, hi) in phases.items()}


def measure(spark: Any, bootstrap: dict[str, str], work: Path, engines: str, args: argparse.Namespace) -> Measured:
    """Every rate through a ``LakehouseService`` of its own (its own state topic and lakehouse) on
    ``engines``, ``<bronze>+<silver>``: bronze ``kafka`` (serve's consumer and delta-rs append) or
    ``spark`` (streams), silver ``auto`` (delta-rs for increments, as serve does) or ``spark``."""
    bronze, silver = engines.split("+")
    from lakehouse.serve import LakehouseService, ServeSettings
    from mirrorlake.traffic import ensure_topic
    from replicator.config import parse_config

    topic = f"{STATE_TOPIC}-{bronze}-{silver}"
    ensure_topic(bootstrap["T"], topic, 1)
    config = parse_config(
        {
            "clusters": {a: {"bootstrap_servers": b} for a, b in bootstrap.items()},
            "flows": [{"source": "S", "target": "T", "topics": ["orders"]}],
            "state_topic": topic,
            "lakehouse": {"path": str(work / f"lakehouse-{bronze}-{silver}")},
        },
        source="bench/freshness.py",
    )
    run = Measured(engines)
    seen, stages = run.seen, run.stages
    ctx = multiprocessing.get_context("spawn")  # this process holds a JVM: no fork
    control = WriterControl(ctx.Value("i", 0), ctx.Value("i", 0), ctx.Event())
    out = work / f"emitted-{bronze}-{silver}.pickle"
    writer = ctx.Process(target=write_events, args=(bootstrap["T"], topic, control, out), name="freshness-writer")
    service = LakehouseService(
        spark,
        config,
        ServeSettings(args.interval, args.trigger, silver=silver, bronze=bronze),  # type: ignore[arg-type]
        on_refresh=stages.refreshed,
        on_stage=stages.started,
    )
    served = threading.Thread(target=service.run, name="lakehouse-serve", daemon=True)
    root = Path(config.lakehouse.path)
    watching = threading.Event()
    watcher = threading.Thread(
        target=watch_as_the_dashboard, args=(root, run.dashboard, watching), name="dashboard", daemon=True
    )
    writer.start()
    served.start()
    watcher.start()
    try:
        control.set(args.rates[0], 0)  # warm-up: tagged 0, not counted
        warm_until = time.monotonic() + 600
        while sum(map(len, stages.per_rate.values())) < args.warmup and time.monotonic() < warm_until:
            time.sleep(args.poll)
        for rate in args.rates:
            stages.rate = rate
            control.set(rate, rate)
            first_ms = int(time.time() * 1000)
            until = time.monotonic() + args.seconds
            while time.monotonic() < until:
                read_gold(root, seen)
                time.sleep(args.poll)
            run.phases[rate] = (first_ms, int(time.time() * 1000))
        control.set(0, 0)
        control.stop.set()
        writer.join(60)
        run.emitted = pickle.loads(out.read_bytes())
        settle_until = time.monotonic() + args.settle
        while time.monotonic() < settle_until:
            read_gold(root, seen)
            if _all_seen(run.emitted, seen):
                break
            time.sleep(args.poll)
        while time.monotonic() < settle_until and not _all_seen(run.emitted, run.dashboard):
            time.sleep(args.poll)  # the dashboard's next rerun after gold showed the last events
        seen.missing = missing_watermarks(root, run.emitted)
        run.bronze = bronze_waits(root, run.phases)
    finally:
        watching.set()
        control.stop.set()
        service.stop()
        served.join(120)
        writer.join(60)
        if writer.is_alive():
            writer.kill()
    return run


def report(run: Measured, args: argparse.Namespace) -> dict[int, float]:
    """Print one engine's table; its p99 per rate."""
    emitted, stages = run.emitted, run.stages
    delayed = delays(emitted, run.seen)
    print(f"{run.silver}: {len(run.seen.reads)} reads of gold, {run.seen.missing} source watermarks "
          "never in rpo")  # fmt: skip
    for rate in args.rates:
        print(f"  asked {rate}/s: {emitted.count[rate] / args.seconds:.0f} events/s written")
    print(f"{'rate/s':>7} {'kind':<10} {'events':>7} {'seen':>6} {'p50 s':>7} {'p99 s':>7} {'max s':>7}")
    p99: dict[int, float] = {}
    for rate in args.rates:
        for kind in ("watermark", "checkpoint"):
            d = delayed.get((kind, rate), [])
            sent = emitted.watermarks.values() if kind == "watermark" else emitted.checkpoints.values()
            total = sum(1 for v in sent for e in v if e[-1] == rate)
            print(f"{rate:>7} {kind:<10} {total:>7} {len(d):>6} {_pct(d, 0.5):>7.2f} {_pct(d, 0.99):>7.2f} "
                  f"{max(d, default=float('nan')):>7.2f}")  # fmt: skip
            p99[rate] = max(p99.get(rate, 0.0), _pct(d, 0.99))
        on_page = delays(emitted, run.dashboard)
        shown = [(kind, on_page.get((kind, rate), [])) for kind in ("watermark", "checkpoint")]
        print(f"{rate:>7} dashboard (shown by its next rerun): " + ", ".join(
            f"{kind} p50 {_pct(d, 0.5):.2f} s p99 {_pct(d, 0.99):.2f} s max {max(d, default=float('nan')):.2f} s"
            for kind, d in shown))  # fmt: skip
        waits = run.bronze.get(rate, [])
        print(f"{rate:>7} bronze: a row's wait for its micro-batch p50 {_pct(waits, 0.5):.2f} s, "
              f"p99 {_pct(waits, 0.99):.2f} s ({len(waits)} rows)")  # fmt: skip
        refreshes = stages.per_rate.get(rate, [])
        if refreshes:
            names = sorted({n for r in refreshes for n in r})
            mean = {n: statistics.mean(r.get(n, 0.0) for r in refreshes) for n in names}
            spent = ", ".join(f"{n or 'other'} {s:.2f} s" for n, s in mean.items())
            print(f"{rate:>7} refreshes {len(refreshes)}, mean per refresh: {spent}")
            totals = [sum(r.values()) for r in refreshes]
            slowest = refreshes[totals.index(max(totals))]
            worst = ", ".join(f"{n or 'other'} {s:.2f}" for n, s in sorted(slowest.items()))
            print(f"{rate:>7} each refresh (s): " + " ".join(f"{t:.1f}" for t in totals) + f"; the slowest: {worst}")
            each = stages.tables.get(rate, [])
            names = sorted({n for r in each for n in r})
            slow = sorted(((statistics.mean(r.get(n, 0.0) for r in each), n) for n in names), reverse=True)[:5]
            print(f"{rate:>7} gold's slowest tables (mean s, side by side): "
                  + ", ".join(f"{n} {t:.2f}" for t, n in slow))  # fmt: skip
    return p99


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=lambda s: [int(x) for x in s.split(",")], default=[1000, 10000])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long each rate is written")
    parser.add_argument("--interval", type=float, default=5.0, help="lakehouse serve --interval")
    parser.add_argument("--trigger", type=float, default=2.0, help="lakehouse serve --trigger")
    parser.add_argument("--poll", type=float, default=0.5, help="seconds between two reads of gold")
    parser.add_argument("--settle", type=float, default=120.0, help="at most this long for the last events")
    parser.add_argument("--warmup", type=int, default=2, help="refreshes before the first rate is measured")
    parser.add_argument(
        "--engines", type=lambda s: s.split(","), default=["kafka+auto", "spark+auto"],
        help="<bronze>+<silver> engines measured one after the other: bronze kafka (as serve runs) or spark, "
        "silver auto (delta-rs increments, as serve runs) or spark",
    )  # fmt: skip
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from ingest.spark import spark_session
    from mirrorlake.localkafka import down, up
    from replicator.config import parse_config

    work = Path(tempfile.mkdtemp(prefix="mirrorlake-freshness-"))
    fleet = cluster_config(work)
    up(fleet)
    try:
        bootstrap = {a: fleet.cluster(a).bootstrap_servers for a in ("S", "T")}
        spark = spark_session(parse_config({"clusters": {"T": {"bootstrap_servers": bootstrap["T"]}}}).spark)
        runs = [measure(spark, bootstrap, work, engines, args) for engines in args.engines]
        settings = f"lakehouse serve --interval {args.interval:g} --trigger {args.trigger:g}"
        print(f"{settings}; gold read every {args.poll:g} s; {PARTITIONS} partitions; {args.seconds:g} s per rate; "
              f"load {load_average()}")  # fmt: skip
        p99 = {run.silver: report(run, args) for run in runs}
        for silver, by_rate in p99.items():
            if len(args.rates) > 1:
                low, high = args.rates[0], args.rates[-1]
                print(f"{silver}: p99 at {high}/s over p99 at {low}/s: {by_rate[high] / by_rate[low]:.2f}x")
        first, *others = list(p99)
        for other in others:
            for rate in args.rates:
                print(f"p99 at {rate}/s, {other} over {first}: {p99[other][rate] / p99[first][rate]:.2f}x")
        for silver, by_rate in p99.items():
            for rate, value in by_rate.items():
                print(f"freshness_p99_s_{silver.replace('+', '_')}_{rate}={value:.2f}")
        return 0
    finally:
        down(fleet)


if __name__ == "__main__":
    raise SystemExit(main())
