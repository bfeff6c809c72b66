"""Broker faults end to end: does ``mirrorlake replicate`` survive them, lose nothing, copy nothing twice?

Starts two local KRaft clusters S and T of its own (``mirrorlake.localkafka``), and for each
scenario runs ``mirrorlake replicate`` as a real process on a fresh topic while a producer writes
about ``--rate`` records/s with unique keys to S. Once records arrive on T the fault is injected:

- ``target-kill-alo``: T SIGKILLed, down for ``--down`` seconds, restarted (at-least-once flow);
- ``target-kill-eos``: the same with ``exactly_once: true`` (T read with read_committed);
- ``source-restart``: S stopped (controlled shutdown) and started again;
- ``state-cluster-frozen``: T, which holds the state topic, SIGSTOPped for ``--down`` seconds
  (connections stay open and nothing answers, as behind a dropped network path), then SIGCONT.

During the fault it polls ``/health`` (must say ``degraded`` and what the flow waits for). After the
fault the producer runs 3 s more, then stops; the replicator must copy everything and exit 0 on
SIGTERM. Records are then counted *by content* (keys) on both clusters: ``lost`` = source keys
absent from T, ``duplicated`` = copies beyond the first (``exactly_once`` must have 0). ``recover s``
is the time from the broker answering again to the flow being healthy and T growing again.

    .venv/bin/python -m bench.faults                     # all scenarios, 30 s outages (~6 minutes)
    .venv/bin/python -m bench.faults --down 10 --scenarios target-kill-alo

Prints a table and, last, ``faults_lost_records=<n>``. ``tests/test_broker_faults.py`` runs the
same scenarios (shorter outages) and asserts on them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

if __package__ in (None, ""):  # run as a file: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from bench.polling import get_whole
from bench.replicate_vs_mm2 import cluster_config
from mirrorlake.localkafka import LocalBroker, down, local_brokers, up
from mirrorlake.traffic import ensure_topic
from replicator.config import MirrorlakeConfig

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 3
_AFTER_FAULT_S = 3.0


@dataclass(frozen=True)
class Scenario:
    name: str
    side: Literal["S", "T"]
    fault: Literal["kill", "restart", "freeze"]
    exactly_once: bool = False


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("target-kill-alo", "T", "kill"),
        Scenario("target-kill-eos", "T", "kill", exactly_once=True),
        Scenario("source-restart", "S", "restart"),
        Scenario("state-cluster-frozen", "T", "freeze"),
    )
}


@dataclass(frozen=True)
class Outcome:
    scenario: str
    produced: int
    copied: int  # records on the target (read_committed), duplicates included
    lost: int
    duplicated: int
    recover_s: float | None  # None: never recovered
    stayed_up: bool  # the replicator process was alive through the fault
    exit_code: int | None  # after SIGTERM
    degraded_seen: bool  # /health said degraded during the fault
    waiting_for: str  # what /health said the flow waits for
    paused_seen: bool  # /health said reading was paused (the target side's faults)
    gauge_seen: bool  # /metrics had mirrorlake_waiting_for_cluster{...} 1.0
    error_lines: int  # ERROR lines and tracebacks in the replicator's log
    log: Path


@dataclass(frozen=True)
class Pair:
    config: MirrorlakeConfig
    brokers: dict[str, LocalBroker]

    def bootstrap(self, alias: str) -> str:
        return self.brokers[alias].bootstrap


@contextmanager
def cluster_pair(work_dir: Path) -> Iterator[Pair]:
    """Two local clusters S and T of their own (never the test session's), stopped at the end."""
    config = cluster_config(work_dir)
    try:
        up(config)
        yield Pair(config, {b.alias: b for b in local_brokers(config)})
    finally:
        down(config)


# -- the pieces of a scenario ----------------------------------------------------------------------
class SteadyProducer:
    """Writes unique keys to the source at about ``rate`` records/s until stopped; counts acknowledged.

    Keys are ``<uuid>-<n>``, or ``<prefix><n>`` with ``prefix``; records go round-robin over the
    first ``partitions`` partitions, or by key with ``partitions=None`` (so partitions added while
    it runs get records too: metadata is refreshed every 2 s)."""

    def __init__(
        self, bootstrap: str, topic: str, rate: int, *, prefix: str | None = None, partitions: int | None = PARTITIONS
    ) -> None:
        self._producer = Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True,
             "topic.metadata.refresh.interval.ms": 2000, "log_level": 0}
        )  # fmt: skip
        self._topic = topic
        self._rate = rate
        self._prefix = prefix
        self._partitions = partitions
        self._stop = threading.Event()
        self.acked = 0
        self.failed = 0
        self._thread = threading.Thread(target=self._run, name="steady-producer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _delivered(self, err: KafkaError | None, _msg: Message) -> None:
        if err is None:
            self.acked += 1
        else:
            self.failed += 1

    def _run(self) -> None:
        i, step = 0, max(1, self._rate // 20)
        while not self._stop.is_set():
            for _ in range(step):
                key = (f"{self._prefix}{i}" if self._prefix is not None else f"{uuid.uuid4().hex}-{i}").encode()
                where = {} if self._partitions is None else {"partition": i % self._partitions}
                while True:
                    try:
                        self._producer.produce(
                            self._topic, key=key, value=key * 2, on_delivery=self._delivered, **where
                        )
                        break
                    except BufferError:
                        self._producer.poll(0.1)
                i += 1
            self._producer.poll(0)
            self._stop.wait(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self._producer.flush(120)


def end_offsets(bootstrap: str, topic: str) -> int:
    """Sum of the topic's end offsets (0 if it cannot be read now)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "faults-bench", "logger": _QUIET})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=2)[1] for p in range(PARTITIONS))
    except Exception:  # noqa: BLE001 (down, or the topic not there yet: nothing readable)
        return 0
    finally:
        consumer.close()


def read_keys(bootstrap: str, topic: str) -> list[bytes]:
    """Every key of the topic, read_committed, from the log start to the end."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "faults-bench", "enable.auto.commit": False,
         "isolation.level": "read_committed", "enable.partition.eof": True, "logger": _QUIET}
    )  # fmt: skip
    try:
        parts = []
        for p in range(PARTITIONS):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high > low:
                parts.append(TopicPartition(topic, p, low))
        keys: list[bytes] = []
        remaining = {tp.partition for tp in parts}
        consumer.assign(parts)
        deadline = time.monotonic() + 120
        while remaining and time.monotonic() < deadline:
            for msg in consumer.consume(10000, 1.0):
                if msg.error():
                    remaining.discard(msg.partition())  # type: ignore[arg-type]
                elif (key := msg.key()) is not None:
                    keys.append(key)
        if remaining:
            raise RuntimeError(f"reading {topic} at {bootstrap} did not reach its end")
        return keys
    finally:
        consumer.close()


def health(port: int) -> dict:
    """The /health page as a dict (a 503 says why it is degraded); ``{}`` when nothing answers whole."""
    reply = get_whole(f"http://127.0.0.1:{port}/health")
    try:
        return json.loads(reply[1]) if reply else {}
    except ValueError:
        return {}


def metrics(port: int) -> str:
    """The /metrics page; ``""`` when nothing answers whole (a poller races the process's exit)."""
    reply = get_whole(f"http://127.0.0.1:{port}/metrics")
    return reply[1].decode() if reply and reply[0] == 200 else ""


def waiting_gauge_on(text: str) -> bool:
    """Whether a Prometheus page says the flow waits for a cluster (the gauge at 1)."""
    return any(
        line.startswith("mirrorlake_waiting_for_cluster{") and line.endswith(" 1.0") for line in text.splitlines()
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_replicator_config(pair: Pair, scenario: Scenario, topic: str, path: Path) -> Path:
    data = {
        "clusters": {a: {"bootstrap_servers": pair.bootstrap(a)} for a in ("S", "T")},
        "flows": [
            {
                "source": "S",
                "target": "T",
                "topics": [topic],
                "exactly_once": scenario.exactly_once,
                "sync_interval_seconds": 0.5,
                "transaction_interval_seconds": 0.5,
            }
        ],
        "replicator_id": f"faults-{scenario.name}-{uuid.uuid4().hex[:6]}",
        "heartbeats_topic": f"heartbeats-{uuid.uuid4().hex[:8]}",
    }
    path.write_text(yaml.safe_dump(data))
    return path


def _wait(predicate: Callable[[], bool], timeout_s: float, every_s: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every_s)
    return False


# -- one scenario ----------------------------------------------------------------------------------
def run_scenario(
    pair: Pair, scenario: Scenario, work_dir: Path, *, down_s: float, rate: int = 2000, verbose: bool = False
) -> Outcome:
    """Run ``scenario`` on ``pair`` and count by content; never raises for a replicator failure."""
    source, target = pair.bootstrap("S"), pair.bootstrap("T")
    topic = f"faults-{scenario.name}-{uuid.uuid4().hex[:8]}"
    remote = f"S.{topic}"
    ensure_topic(source, topic, PARTITIONS)
    config = write_replicator_config(pair, scenario, topic, work_dir / f"{topic}.yaml")
    port = free_port()
    log = work_dir / f"{topic}.log"  # unique: a scenario may run more than once
    producer = SteadyProducer(source, topic, rate)
    with log.open("w") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mirrorlake.cli", *(["-vv"] if verbose else []), "replicate", str(config),
             "--status-port", str(port)],
            cwd=ROOT, stdout=log_file, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONFAULTHANDLER": "1"},  # a crash in native code leaves its stack in the log
        )  # fmt: skip
    recover_s: float | None = None
    degraded: list[str] = []
    seen = {"paused": False, "gauge": False}
    try:
        producer.start()
        if not _wait(lambda: proc.poll() is not None or end_offsets(target, remote) >= rate, 120):
            raise RuntimeError(f"{scenario.name}: nothing arrived on the target before the fault")
        if proc.poll() is not None:
            raise RuntimeError(f"{scenario.name}: the replicator exited with {proc.returncode} before the fault")
        broker = pair.brokers[scenario.side]

        def watch_health() -> None:
            body = health(port)
            if body.get("status") == "degraded":
                for flow in body.get("flows", {}).values():
                    degraded.extend(f"{side}: {why}" for side, why in flow.get("waiting_for", {}).items())
                    seen["paused"] = seen["paused"] or bool(flow.get("reading_paused"))
                seen["gauge"] = seen["gauge"] or waiting_gauge_on(metrics(port))

        if scenario.fault == "kill":
            broker.kill()
        elif scenario.fault == "freeze":
            broker.freeze()
        else:
            broker.stop()
        fault_end = time.monotonic() + down_s
        while time.monotonic() < fault_end:
            watch_health()
            time.sleep(0.5)
        stayed_up = proc.poll() is None
        if scenario.fault == "freeze":
            broker.freeze(False)
        else:
            broker.start()
            broker.wait_ready()
        back = time.monotonic()
        count_at_back = end_offsets(target, remote)

        def recovered() -> bool:
            if proc.poll() is not None:
                return True
            return health(port).get("status") == "ok" and end_offsets(target, remote) > count_at_back

        if _wait(recovered, 180, every_s=0.2) and proc.poll() is None:
            recover_s = time.monotonic() - back
        time.sleep(_AFTER_FAULT_S)
        producer.stop()
        stayed_up = stayed_up and proc.poll() is None
        _wait(lambda: proc.poll() is not None or end_offsets(target, remote) >= producer.acked, 180)
        _wait(lambda: proc.poll() is not None or _missing(source, target, topic, remote) == 0, 120, every_s=2)
    finally:
        producer.stop()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            exit_code: int | None = proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            exit_code = None
    source_keys, target_keys = read_keys(source, topic), read_keys(target, remote)
    text = log.read_text(errors="replace")
    return Outcome(
        scenario=scenario.name,
        produced=len(source_keys),
        copied=len(target_keys),
        lost=len(set(source_keys) - set(target_keys)),
        duplicated=len(target_keys) - len(set(target_keys)),
        recover_s=recover_s,
        stayed_up=stayed_up,
        exit_code=exit_code,
        degraded_seen=bool(degraded),
        waiting_for=degraded[-1] if degraded else "",
        paused_seen=seen["paused"],
        gauge_seen=seen["gauge"],
        error_lines=sum(1 for line in text.splitlines() if " ERROR " in line or line.startswith("Traceback")),
        log=log,
    )


def _missing(source: str, target: str, topic: str, remote: str) -> int:
    try:
        return len(set(read_keys(source, topic)) - set(read_keys(target, remote)))
    except RuntimeError:
        return -1


class _Quiet:
    def log(self, level: int, msg: str, *args: object) -> None:
        return None


_QUIET = _Quiet()


# -- the report --------------------------------------------------------------------------------------
def format_table(outcomes: list[Outcome], down_s: float) -> list[str]:
    head = (
        f"{'scenario':<22} {'produced':>9} {'lost':>5} {'duplicated':>10} {'recover s':>9}  "
        "stayed up  exit  /health during fault"
    )
    lines = [head, "-" * len(head)]
    for o in outcomes:
        recover = f"{o.recover_s:.1f}" if o.recover_s is not None else "never"
        seen = f"degraded ({o.waiting_for})" if o.degraded_seen else "not degraded"
        lines.append(
            f"{o.scenario:<22} {o.produced:>9} {o.lost:>5} {o.duplicated:>10} {recover:>9}  "
            f"{'yes' if o.stayed_up else 'NO':<9}  {o.exit_code!s:>4}  {seen}"
        )
    lines.append(f"(outage {down_s:g} s; duplicates under at-least-once are allowed, under exactly-once they are not)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--down", type=float, default=30.0, help="seconds each broker stays down or frozen")
    parser.add_argument("--rate", type=int, default=2000, help="records/s written to the source")
    parser.add_argument("--scenarios", nargs="+", choices=sorted(SCENARIOS), default=list(SCENARIOS))
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    parser.add_argument("-v", "--verbose", action="store_true", help="run the replicator with -vv (debug log)")
    parser.add_argument("--keep", type=Path, default=None, help="keep clusters' data and replicator logs here")
    args = parser.parse_args(argv)
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="mirrorlake-faults-") as tmp:
        work_dir = args.keep or Path(tmp)
        work_dir.mkdir(parents=True, exist_ok=True)
        with cluster_pair(work_dir) as pair:
            for name in args.scenarios:
                outcome = run_scenario(
                    pair, SCENARIOS[name], work_dir, down_s=args.down, rate=args.rate, verbose=args.verbose
                )
                print(f"{name}: done", file=sys.stderr, flush=True)
                outcomes.append(outcome)
                if outcome.error_lines or outcome.exit_code != 0:
                    print(outcome.log.read_text(errors="replace")[-3000:], file=sys.stderr)
    lost = sum(o.lost for o in outcomes)
    report = [
        f"date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        *format_table(outcomes, args.down),
        f"faults_lost_records={lost}",
    ]
    text = "\n".join(report) + "\n"
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
