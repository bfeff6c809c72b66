"""How fresh the lakehouse is while ``lakehouse serve`` runs: state event emitted -> visible in gold.

Not a test: prints numbers measured side by side in one run (one broker, one Spark session, one
``LakehouseService``, the same settings for every rate).

Two local clusters S and T of its own; the state topic on T. A writer emits the state events of a
flow ``S->T`` at ``--rates`` events/s, each rate for ``--seconds``: per step and partition an
offset sync, a source and a target watermark and a checkpoint (``emitted_at_ms`` is the moment it
is handed to the producer). Meanwhile ``LakehouseService`` (what ``mirrorlake lakehouse serve``
runs: the bronze stream every ``--trigger`` seconds, silver and gold every ``--interval``) keeps
the lakehouse up to date, and a reader asks gold through DuckDB (``mirrorlake sql``'s engine) every
``--poll`` seconds:

- a source watermark is visible when its row is in ``rpo`` (one row per source watermark);
- a checkpoint is visible when ``group_offsets`` holds it or a later one of its group and partition
  (``as_of_ms`` >= its ``emitted_at_ms``): the table keeps the latest only.

Before the first rate, a warm-up at that rate until the service has refreshed ``--warmup`` times
(Spark's first queries compile their plans; not counted). Delay = the read that first saw it minus
its ``emitted_at_ms`` (so up to ``--poll`` late). For each
rate: p50, p99 and max per kind, and where the time went (the service's refreshes: silver, gold,
counting rows; the trigger and interval are waits). After the last rate the writer stops and every
emitted event must become visible within ``--settle`` seconds. All of it once per silver engine
(``--silver``): ``auto`` (increments decoded by delta-rs, as ``lakehouse serve`` runs) and ``spark``
(every increment a Spark stream), each with a state topic and a lakehouse of its own, one after the
other in one run; the ratio of their p99 per rate, and last ``freshness_p99_s_<engine>_<rate>=<value>``.

    .venv/bin/python -m bench.freshness                               # 1,000 and 10,000 events/s
    .venv/bin/python -m bench.freshness --rates 1000 --seconds 30     # a quick look
"""

from __future__ import annotations

import argparse
import logging
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
    """What the writer handed to the producer, for the reader to find."""

    watermarks: dict[str, tuple[int, int]] = field(default_factory=dict)  # event id -> (emitted ms, rate)
    checkpoints: dict[tuple[str, int], list[tuple[int, int]]] = field(
        default_factory=lambda: defaultdict(list)
    )  # (group, partition) -> [(emitted ms, rate)] in order
    count: dict[int, int] = field(default_factory=lambda: defaultdict(int))  # rate -> events
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class Seen:
    delays: dict[tuple[str, int], list[float]] = field(default_factory=lambda: defaultdict(list))  # (kind, rate)
    watermarks: set[str] = field(default_factory=set)
    checkpoint_upto: dict[tuple[str, int], int] = field(default_factory=dict)  # index of the next unseen
    reads: int = 0


@dataclass
class StageTimes:
    """Seconds per stage of each refresh (``LakehouseService``'s ``on_stage``/``on_refresh``), by rate."""

    rate: int = 0
    per_rate: dict[int, list[dict[str, float]]] = field(default_factory=lambda: defaultdict(list))
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

    def refreshed(self, _report: object) -> None:
        self.started("")
        self.per_rate[self.rate].append(dict(self._current))
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


class Writer(threading.Thread):
    """Emits ``rate`` events/s in 10 ms ticks until told another rate or to stop (rate 0 pauses)."""

    def __init__(self, bootstrap: str, emitted: Emitted, topic: str = STATE_TOPIC) -> None:
        super().__init__(name="freshness-writer", daemon=True)
        self._topic = topic
        from confluent_kafka import Producer

        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
        self._emitted = emitted
        self.rate = 0  # events/s written
        self.tag = 0  # the rate the events are counted under (0: a warm-up, not counted)
        self.stopped = threading.Event()
        self._step = 0

    def run(self) -> None:
        from replicator.events import Checkpoint, Watermark, encode

        owed = 0.0
        last = time.monotonic()
        while not self.stopped.is_set():
            now = time.monotonic()
            owed += self.rate * (now - last) / KINDS_PER_STEP  # steps owed, one per partition in turn
            last = now
            rate = self.tag
            while owed >= 1:
                owed -= 1
                partition, step = self._step % PARTITIONS, self._step // PARTITIONS
                self._step += 1
                for event in _step_events(step, partition):
                    value = encode(event)
                    while True:
                        try:
                            self._producer.produce(self._topic, key=FLOW.encode(), value=value)
                            break
                        except BufferError:  # the local queue is full: let the broker catch up
                            self._producer.poll(0.05)
                    with self._emitted.lock:
                        self._emitted.count[rate] += 1
                        if rate and isinstance(event, Watermark) and event.side == "source":
                            self._emitted.watermarks[event.event_id] = (event.emitted_at_ms, rate)
                        elif rate and isinstance(event, Checkpoint):
                            self._emitted.checkpoints[(event.group, partition)].append((event.emitted_at_ms, rate))
            self._producer.poll(0)
            if not self.rate:
                owed = 0.0
            self.stopped.wait(0.01)
        self._producer.flush(30)


def read_gold(root: Path, emitted: Emitted, seen: Seen) -> None:
    """One read of gold: every event it shows for the first time gets its delay."""
    from lakehouse.sql import LakehouseSQL, TableNotFoundError

    try:
        sql = LakehouseSQL(root)
    except TableNotFoundError:
        return  # the first build has not written gold yet
    try:
        if not {"rpo", "group_offsets"} <= set(sql.views):
            return
        ids = [r[0] for r in sql.query("SELECT watermark_event_id FROM rpo").rows]
        latest = sql.query('SELECT "group", "partition", max(as_of_ms) FROM group_offsets GROUP BY ALL').rows
    finally:
        sql.close()
    now_ms = time.time() * 1000
    seen.reads += 1
    with emitted.lock:
        for event_id in ids:
            if event_id in seen.watermarks or event_id not in emitted.watermarks:
                continue
            seen.watermarks.add(event_id)
            at, rate = emitted.watermarks[event_id]
            seen.delays[("watermark", rate)].append((now_ms - at) / 1000)
        for group, partition, as_of in latest:
            sent = emitted.checkpoints.get((group, partition), [])
            i = seen.checkpoint_upto.get((group, partition), 0)
            while i < len(sent) and sent[i][0] <= as_of:
                seen.delays[("checkpoint", sent[i][1])].append((now_ms - sent[i][0]) / 1000)
                i += 1
            seen.checkpoint_upto[(group, partition)] = i


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


@dataclass
class Measured:
    """One engine's run: what was written, what gold showed and when, where each refresh's time went."""

    silver: str
    emitted: Emitted = field(default_factory=Emitted)
    seen: Seen = field(default_factory=Seen)
    stages: StageTimes = field(default_factory=StageTimes)


def measure(spark: Any, bootstrap: dict[str, str], work: Path, silver: str, args: argparse.Namespace) -> Measured:
    """Every rate through a ``LakehouseService`` of its own (its own state topic and lakehouse) whose
    silver runs on ``silver`` (``auto``: delta-rs for increments, as serve does; ``spark``)."""
    from lakehouse.serve import LakehouseService, ServeSettings
    from mirrorlake.traffic import ensure_topic
    from replicator.config import parse_config

    topic = f"{STATE_TOPIC}-{silver}"
    ensure_topic(bootstrap["T"], topic, 1)
    config = parse_config(
        {
            "clusters": {a: {"bootstrap_servers": b} for a, b in bootstrap.items()},
            "flows": [{"source": "S", "target": "T", "topics": ["orders"]}],
            "state_topic": topic,
            "lakehouse": {"path": str(work / f"lakehouse-{silver}")},
        },
        source="bench/freshness.py",
    )
    run = Measured(silver)
    emitted, seen, stages = run.emitted, run.seen, run.stages
    writer = Writer(bootstrap["T"], emitted, topic)
    service = LakehouseService(
        spark,
        config,
        ServeSettings(args.interval, args.trigger, silver=silver),
        on_refresh=stages.refreshed,
        on_stage=stages.started,
    )
    served = threading.Thread(target=service.run, name="lakehouse-serve", daemon=True)
    writer.start()
    served.start()
    root = Path(config.lakehouse.path)
    try:
        writer.rate = args.rates[0]  # warm-up: tagged 0, not counted
        warm_until = time.monotonic() + 600
        while sum(map(len, stages.per_rate.values())) < args.warmup and time.monotonic() < warm_until:
            time.sleep(args.poll)
        for rate in args.rates:
            stages.rate = rate
            writer.rate = writer.tag = rate
            until = time.monotonic() + args.seconds
            while time.monotonic() < until:
                read_gold(root, emitted, seen)
                time.sleep(args.poll)
        writer.rate = writer.tag = 0
        settle_until = time.monotonic() + args.settle
        while time.monotonic() < settle_until:
            read_gold(root, emitted, seen)
            with emitted.lock:
                pending = (
                    len(emitted.watermarks)
                    - len(seen.watermarks)
                    + sum(len(v) - seen.checkpoint_upto.get(k, 0) for k, v in emitted.checkpoints.items())
                )
            if pending == 0:
                break
            time.sleep(args.poll)
    finally:
        writer.stopped.set()
        service.stop()
        served.join(120)
        writer.join(60)
    return run


def report(run: Measured, args: argparse.Namespace) -> dict[int, float]:
    """Print one engine's table; its p99 per rate."""
    emitted, seen, stages = run.emitted, run.seen, run.stages
    print(f"silver on {run.silver}:")
    for rate in args.rates:
        print(f"  asked {rate}/s: {emitted.count[rate] / args.seconds:.0f} events/s written")
    print(f"{'rate/s':>7} {'kind':<10} {'events':>7} {'seen':>6} {'p50 s':>7} {'p99 s':>7} {'max s':>7}")
    p99: dict[int, float] = {}
    for rate in args.rates:
        for kind in ("watermark", "checkpoint"):
            d = seen.delays.get((kind, rate), [])
            total = sum(1 for _i, (_a, r) in emitted.watermarks.items() if r == rate) if kind == "watermark" else (
                sum(1 for v in emitted.checkpoints.values() for _a, r in v if r == rate))  # fmt: skip
            print(f"{rate:>7} {kind:<10} {total:>7} {len(d):>6} {_pct(d, 0.5):>7.2f} {_pct(d, 0.99):>7.2f} "
                  f"{max(d, default=float('nan')):>7.2f}")  # fmt: skip
            p99[rate] = max(p99.get(rate, 0.0), _pct(d, 0.99))
        refreshes = stages.per_rate.get(rate, [])
        if refreshes:
            names = sorted({n for r in refreshes for n in r})
            mean = {n: statistics.mean(r.get(n, 0.0) for r in refreshes) for n in names}
            spent = ", ".join(f"{n or 'other'} {s:.2f} s" for n, s in mean.items())
            print(f"{rate:>7} refreshes {len(refreshes)}, mean per refresh: {spent}")
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
        "--silver", type=lambda s: s.split(","), default=["auto", "spark"],
        help="silver engines measured one after the other: auto (delta-rs increments, as serve runs), spark",
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
        runs = [measure(spark, bootstrap, work, silver, args) for silver in args.silver]
        settings = f"lakehouse serve --interval {args.interval:g} --trigger {args.trigger:g}"
        print(f"{settings}; gold read every {args.poll:g} s; {PARTITIONS} partitions; {args.seconds:g} s per rate; "
              f"load {load_average()}")  # fmt: skip
        p99 = {run.silver: report(run, args) for run in runs}
        for silver, by_rate in p99.items():
            if len(args.rates) > 1:
                low, high = args.rates[0], args.rates[-1]
                print(f"silver on {silver}: p99 at {high}/s over p99 at {low}/s: {by_rate[high] / by_rate[low]:.2f}x")
        if {"auto", "spark"} <= set(p99):
            for rate in args.rates:
                print(f"p99 at {rate}/s, silver on spark over auto: {p99['spark'][rate] / p99['auto'][rate]:.2f}x")
        for silver, by_rate in p99.items():
            for rate, value in by_rate.items():
                print(f"freshness_p99_s_{silver}_{rate}={value:.2f}")
        return 0
    finally:
        down(fleet)


if __name__ == "__main__":
    raise SystemExit(main())
