"""A nemesis soak: active/active replication under a seeded schedule of faults, judged by the clusters' contents.

Two local clusters S and T of its own; flows S->T and T->S (default policy: ``S.orders`` on T,
``T.orders`` on S), each run by ``--processes`` replicator processes (``mirrorlake replicate``, the
same config: the flows' partitions are shared through their consumer groups). While it runs:
producers write ``orders`` on both sides (unique keys, partitioned by key), a transactional producer writes
``payments`` on S with one transaction in five aborted, and a consumer group on each side reads
``orders`` and commits. A schedule drawn from ``--seed`` injects, one after another (sometimes two
at once):

- ``kill-replicator`` / ``term-replicator``: SIGKILL / SIGTERM one replicator process, restarted after the hold;
- ``kill-broker`` / ``freeze-broker``: SIGKILL (restart) / SIGSTOP (SIGCONT) the broker of S or T;
- ``kill-both``: the source broker and a replicator SIGKILLed together (issue 39 item 0);
- ``add-partition``: ``orders`` on S gains a partition;
- ``delete-unreplicated``: every replicator stopped, records produced to ``S.orders[0]`` and deleted
  there (delete-records) before any copy, the replicators started again;
- ``partition-replicator``: a network partition between one replicator process and one broker
  (``bench/netsplit.py``: iptables drops what the process sends to the broker's port; root only,
  otherwise the fault is skipped and the report says why);
- ``recreate-topic``: ``accounts`` on S (its own producer) deleted and created again while the
  flows run; its producer starts a new life of keys on the new topic;
- ``delete-remote``: T's ``S.accounts`` (the remote topic of S->T) deleted under the running flows
  and not created again: the flow's writes fail and it stops naming the topic; its next start
  creates it again and copies ``accounts`` again from its log start (a new remote life). Drawn
  from a generator of its own (``_remote_deletions``), beside the other faults' schedule, which it
  leaves as it was for every seed;
- ``compact-target``: T's ``S.orders`` turned compacted (segments rolled every 2 s, cleaned at once)
  for the rest of the run, as an operator's slip would leave it: keys are unique, so the cleaner
  removes only the earlier copies of a record copied twice.

The flow S->T copies at least once, T->S exactly once (transactional; ``duplicated`` is judged
read_committed there and must be 0).

Whenever S is down (``kill-broker`` or ``kill-both`` of S), the failover plan of S->T for S's group
is made with the source down, as an operator in that incident would (``failover plan``), and judged
once S is back against the contents: for each partition, the records lost, re-read and duplicated
by resuming where the plan says (``mirrorlake.groundtruth.resume_cost``), the target read as it was
when the plan was made.

At the end the producers and groups stop, the replicators run until caught up, and everything is
judged from the clusters' contents (``mirrorlake.groundtruth``), never from mirrorlake's own figures:

- ``missing``: records on a source (read_committed) with no copy on the target: must be 0;
- ``aborted``: records of aborted transactions on a target: must be 0;
- ``duplicated``: copies beyond a record's first (at-least-once; the aim is 0);
- ``lost_before_copy``: records deleted before their copy and never copied (a deletion a broker
  restart undid lets them be copied after all: Kafka checkpoints a moved log start once a minute),
  against the sum of the flow's ``records_lost_before_copy`` events: must be equal;
- ``revived``: records deleted before their copy (and said lost) that a broker killed within a minute
  of the deletion brought back (reported: the flow's position is past them; not ``missing``);
- ``gone``: records of a deleted topic that had no copy when it was deleted (reported: nothing on
  the source says how many there were once the topic is gone, so the flow does not count them);
- ``mapping``: source offsets whose translation through the flow's offset syncs differs from the
  latest copy's (``GroundTruth``): must be 0;
- ``groups``: each group's last checkpoint, against its committed offset and the exact translation;
- ``plans``: every failover plan made while S was down, row by row against the truth: must equal.

    .venv/bin/python -m bench.chaos --seed 7 --minutes 3
    .venv/bin/python -m bench.chaos --seed 7 --minutes 30 --out bench/results/chaos-<date>.txt

Prints the schedule, each figure and last ``chaos_failures=<n>``; exit 1 when a must-be figure is off.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from bench import netsplit
from bench.faults import SteadyProducer
from bench.replicate_vs_mm2 import cluster_config
from mirrorlake.groundtruth import GroundTruth, Rec, copies_by_content, read_partition, resume_cost, state_events
from mirrorlake.localkafka import LocalBroker, down, local_brokers, up
from mirrorlake.traffic import ensure_topic
from replicator.client.failover_cost import interval_union
from replicator.client.mapping_index import MappingIndex
from replicator.client.translation import translate_offsets
from replicator.config import MirrorlakeConfig, parse_config
from replicator.errors import MirrorlakeError, TranslationError
from replicator.events import RecordsLostBeforeCopy
from replicator.failover import plan_failover
from replicator.failover.plan import GroupPartitionPlan
from replicator.kafka.log_bounds import partition_bounds, throwaway_reader
from replicator.tasks.audit import RangeReader

ROOT = Path(__file__).resolve().parent.parent
SIDES = ("S", "T")
PARTITIONS = 3
STATE_TOPIC = "mirrorlake.events"
KINDS = (
    "kill-replicator",
    "term-replicator",
    "kill-broker",
    "freeze-broker",
    "kill-both",
    "add-partition",
    "delete-unreplicated",
    "partition-replicator",
    "recreate-topic",
    "compact-target",
)
EXACTLY_ONCE = ("T->S",)
COMPACTED = {"cleanup.policy": "compact", "segment.ms": "2000", "min.cleanable.dirty.ratio": "0.01",
             "min.compaction.lag.ms": "0"}  # fmt: skip
_log = logging.getLogger("bench.chaos")


@dataclass(frozen=True)
class Fault:
    at_s: float
    kind: str
    side: str  # the broker's cluster (S or T), or the replicator process index as text
    hold_s: float

    def __str__(self) -> str:
        return f"{self.at_s:6.1f} s  {self.kind:<20} {self.side:<3} hold {self.hold_s:4.1f} s"


def schedule(seed: int, seconds: float, processes: int) -> list[Fault]:
    """The faults of a run, from ``seed`` alone: the same seed gives the same schedule."""
    rng = random.Random(seed)
    out: list[Fault] = []
    t = 12.0
    while t < seconds - 20:
        kind = rng.choice(KINDS)
        if kind in ("kill-replicator", "term-replicator"):
            side = str(rng.randrange(processes))
        elif kind in ("add-partition", "delete-unreplicated", "kill-both", "recreate-topic"):
            side = "S"
        elif kind == "compact-target":
            side = "T"
        elif kind == "partition-replicator":  # process/cluster: cut off from that cluster's broker
            side = f"{rng.randrange(processes)}/{rng.choice(SIDES)}"
        else:
            side = rng.choice(SIDES)
        hold = round(rng.uniform(2.0, 8.0), 1)
        out.append(Fault(round(t, 1), kind, side, hold))
        if rng.random() < 0.25:  # two faults at once: a replicator dies during the other
            out.append(Fault(round(t + 0.5, 1), "kill-replicator", str(rng.randrange(processes)), hold))
        t += hold + rng.uniform(6.0, 12.0)
    return sorted([*out, *_remote_deletions(seed, seconds)], key=lambda f: f.at_s)


def _remote_deletions(seed: int, seconds: float) -> list[Fault]:
    """``delete-remote`` faults, about one per three minutes, from a generator of their own (added
    after the schedules of earlier runs were published: theirs stay as they were)."""
    rng = random.Random(f"delete-remote/{seed}")
    return [
        Fault(round(at, 1), "delete-remote", "T", 0.0)
        for at in (rng.uniform(20.0, max(20.0, seconds - 40)) for _ in range(int(seconds // 180) + 1))
        if rng.random() < 0.5
    ]


# -- the load ------------------------------------------------------------------------------------
class TransactionalProducer:
    """Transactions of 20 records to ``payments``; one in five aborted (its keys must never be copied)."""

    def __init__(self, bootstrap: str, topic: str, seed: int) -> None:
        self._conf = {"bootstrap.servers": bootstrap, "transactional.id": f"chaos-{uuid.uuid4().hex[:8]}",
                      "log_level": 0}  # fmt: skip
        self._topic = topic
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self.aborted: set[bytes] = set()
        self.committed = 0
        self.errors = 0
        self._thread = threading.Thread(target=self._run, name="producer-txn", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        producer = self._renew(None)  # S may be down right now (a fault at the start)
        n = 0
        while not self._stop.is_set():
            keys = [f"txn-{n + i}".encode() for i in range(20)]
            n += 20
            abort = self._rng.random() < 0.2
            try:
                producer.begin_transaction()
                for i, key in enumerate(keys):
                    producer.produce(self._topic, key=key, value=key, partition=i % PARTITIONS)
                if abort:
                    producer.abort_transaction(30)
                    self.aborted.update(keys)
                else:
                    producer.commit_transaction(30)
                    self.committed += len(keys)
            except KafkaException:  # a broker fault: the transaction's fate is read from the log at the end
                self.errors += 1
                self.aborted.update(keys)  # never committed for sure: must not be on a target unless on the source
                producer = self._renew(producer)
            self._stop.wait(0.1)

    def _renew(self, old: Producer | None) -> Producer:
        del old
        while not self._stop.is_set():
            producer = Producer(self._conf)  # the same transactional.id fences the old one
            try:
                producer.init_transactions(30)
                return producer
            except KafkaException:
                time.sleep(1)
        return Producer(self._conf)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)


class Group:
    """A consumer group reading ``orders`` on one side and committing every second."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.group = group
        self._conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": True, "auto.commit.interval.ms": 1000, "log_level": 0,
                      "topic.metadata.refresh.interval.ms": 2000}  # fmt: skip
        self._topic = topic
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"group-{group}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        consumer = Consumer(self._conf)
        consumer.subscribe([self._topic])
        try:
            while not self._stop.is_set():
                consumer.consume(500, 0.5)
                time.sleep(0.2)  # reads behind the producers: a lagging group
        finally:
            consumer.close()  # commits its position

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


# -- the replicators -----------------------------------------------------------------------------
class Replicators:
    """``n`` replicator processes of one config; each can be killed and started again."""

    def __init__(self, config: Path, n: int, logs: Path, *, partitionable: bool = False) -> None:
        self._config, self._logs = config, logs
        self._partitionable = partitionable  # each process under a group of its own (bench.netsplit)
        self.procs: list[subprocess.Popen | None] = [None] * n
        self.exits: list[tuple[int, int]] = []  # (process, exit code) of every process that ended

    def start(self, i: int, *extra: str) -> subprocess.Popen:
        group = netsplit.as_group(netsplit.GID_BASE + i) if self._partitionable else []
        with (self._logs / f"replicator-{i}.log").open("a") as log:  # the child keeps its own copy
            # one id per process slot, kept across its restarts (a StatefulSet's pod names): each
            # exactly-once process has a transactional id of its own and fences its predecessor
            env = {**os.environ, "MIRRORLAKE_REPLICATOR_ID": f"chaos-{i}"}
            proc = subprocess.Popen(
                [*group, sys.executable, "-m", "mirrorlake.cli", "replicate", str(self._config), *extra],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env,
            )  # fmt: skip
        self.procs[i] = proc
        return proc

    def send(self, i: int, sig: signal.Signals) -> None:
        proc = self.procs[i]
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            code = proc.wait(90)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait(30)
        self.exits.append((i, code))
        self.procs[i] = None

    def ensure_running(self) -> None:
        for i, proc in enumerate(self.procs):
            if proc is None or proc.poll() is not None:
                if proc is not None:
                    self.exits.append((i, proc.returncode))
                self.start(i)

    def stop_all(self, sig: signal.Signals = signal.SIGTERM) -> None:
        for i in range(len(self.procs)):
            self.send(i, sig)


# -- the run ---------------------------------------------------------------------------------------
@dataclass
class Run:
    seed: int
    seconds: float
    processes: int
    work: Path
    faults: list[Fault] = field(default_factory=list)
    lost_ranges: dict[tuple[str, int], list[tuple[int, int]]] = field(default_factory=dict)  # deleted before copy
    deleted: dict[tuple[str, int], list[Rec]] = field(default_factory=dict)  # source records deleted, as read before
    earlier_lives: dict[tuple[str, int], list[Rec]] = field(default_factory=dict)  # records of deleted topics
    lives: int = 1  # of ``accounts`` on S
    accounts: SteadyProducer | None = None
    cannot_partition: str | None = None  # why partition faults are skipped (None: they are made)
    config: MirrorlakeConfig | None = None
    plan_problems: list[str] = field(default_factory=list)
    plans_judged: int = 0  # rows of plans made with S down, judged against the truth
    started_ms: int = 0  # wall clock of the schedule's start, to place records' timestamps in it
    notes: list[str] = field(default_factory=list)


@contextmanager
def clusters(work: Path) -> Iterator[tuple[MirrorlakeConfig, dict[str, LocalBroker]]]:
    config = cluster_config(work)
    try:
        up(config)
        yield config, {b.alias: b for b in local_brokers(config)}
    finally:
        down(config)


def write_config(fleet: MirrorlakeConfig, path: Path) -> MirrorlakeConfig:
    flow = {"topics": ["orders", "payments", "accounts"], "groups": ["chaos-.*"], "sync_interval_seconds": 0.5,
            "emit_checkpoints_interval_seconds": 1, "refresh_topics_interval_seconds": 2,
            "watermarks_interval_seconds": 2}  # fmt: skip
    flows = [{"source": a, "target": b, **flow, "exactly_once": f"{a}->{b}" in EXACTLY_ONCE} for a, b in ("ST", "TS")]
    data = {
        "clusters": {a: {"bootstrap_servers": fleet.cluster(a).bootstrap_servers} for a in SIDES},
        "flows": flows,
        "state_topic": STATE_TOPIC,
        "stop_timeout_seconds": 10,
    }
    path.write_text(yaml.safe_dump(data))
    return parse_config(data, source=str(path))


def inject(
    run: Run, fault: Fault, brokers: dict[str, LocalBroker], reps: Replicators, bootstrap: dict[str, str]
) -> None:
    """Apply one fault and undo it after its hold (the schedule goes on meanwhile only between faults)."""
    if fault.kind in ("kill-replicator", "term-replicator"):
        i = int(fault.side)
        reps.send(i, signal.SIGKILL if fault.kind == "kill-replicator" else signal.SIGTERM)
        time.sleep(fault.hold_s)
        reps.ensure_running()
    elif fault.kind == "kill-broker":
        brokers[fault.side].kill()
        check = plan_while_down(run, bootstrap) if fault.side == "S" else None
        time.sleep(fault.hold_s)
        brokers[fault.side].start()
        brokers[fault.side].wait_ready(120)
        if check is not None:
            judge_plan(run, check, bootstrap)
    elif fault.kind == "freeze-broker":
        brokers[fault.side].freeze(True)
        time.sleep(fault.hold_s)
        brokers[fault.side].freeze(False)
    elif fault.kind == "kill-both":
        brokers["S"].kill()
        reps.send(0, signal.SIGKILL)
        check = plan_while_down(run, bootstrap)
        time.sleep(fault.hold_s)
        brokers["S"].start()
        brokers["S"].wait_ready(120)
        judge_plan(run, check, bootstrap)
        reps.ensure_running()
    elif fault.kind == "add-partition":
        admin = AdminClient({"bootstrap.servers": bootstrap["S"]})
        now = len(admin.list_topics("orders", timeout=30).topics["orders"].partitions)
        admin.create_partitions([NewPartitions("orders", now + 1)])["orders"].result(30)
        run.notes.append(f"orders on S: {now} -> {now + 1} partitions")
    elif fault.kind == "delete-unreplicated":
        delete_unreplicated(run, reps, bootstrap)
    elif fault.kind == "partition-replicator":
        process, cluster = fault.side.split("/")
        if run.cannot_partition is None:
            with netsplit.partitioned(netsplit.GID_BASE + int(process), brokers[cluster].port):
                time.sleep(fault.hold_s)
        else:
            run.notes.append(f"partition-replicator at {fault.at_s} s skipped: {run.cannot_partition}")
    elif fault.kind == "recreate-topic":
        recreate_accounts(run, bootstrap)
    elif fault.kind == "delete-remote":
        admin = AdminClient({"bootstrap.servers": bootstrap["T"]})
        admin.delete_topics(["S.accounts"])["S.accounts"].result(30)
        run.notes.append(f"delete-remote at {fault.at_s} s: S.accounts deleted on T under the running flow S->T")
    elif fault.kind == "compact-target":
        admin = AdminClient({"bootstrap.servers": bootstrap["T"]})
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in COMPACTED.items()]
        change = ConfigResource("topic", "S.orders", incremental_configs=entries)
        next(iter(admin.incremental_alter_configs([change]).values())).result(30)
        run.notes.append(f"compact-target at {fault.at_s} s: S.orders on T compacted from now on")
    reps.ensure_running()


# -- failover plans made while S is down ---------------------------------------------------------
@dataclass(frozen=True)
class PlanCheck:
    at: str
    rows: tuple[GroupPartitionPlan, ...]
    ends: dict[int, int]  # T's S.orders log end of each partition while the plan was made
    still: bool  # those ends did not move while the plan was made (else the plan is not judged)


def plan_while_down(run: Run, bootstrap: dict[str, str]) -> PlanCheck | None:
    """S->T's failover plan for S's group, with S down (a moment for copies in flight to land first)."""
    assert run.config is not None
    time.sleep(1.5)
    before = _log_ends(bootstrap["T"], "S.orders")
    try:
        plan = plan_failover(run.config, "S->T", groups="chaos-app-S", stale_after_s=0)
    except MirrorlakeError as exc:
        if "no group has a checkpoint" in str(exc):  # too early in the run: nothing to plan yet
            run.notes.append(f"failover plan with S down: {exc}")
        else:
            run.plan_problems.append(f"failover plan with S down refused: {exc}")
        return None
    after = _log_ends(bootstrap["T"], "S.orders")
    rows = tuple(r for g in plan.groups for r in g.partitions if r.source_topic == "orders")
    stamp = datetime.datetime.now(datetime.UTC).strftime("%H:%M:%S")
    return PlanCheck(stamp, rows, after, before == after)


def judge_plan(run: Run, check: PlanCheck | None, bootstrap: dict[str, str]) -> None:
    """The plan's lost, re-read and duplicated of each partition, against the contents (S is back)."""
    if check is None:
        return
    if not check.still:
        run.notes.append(f"plan at {check.at}: the target moved while it was made; not judged")
        return
    for row in check.rows:
        p = row.partition
        if row.target_offset is None:
            run.plan_problems.append(f"plan at {check.at}: orders[{p}] has no resume offset ({row.method})")
            continue
        try:
            source = [*run.deleted.get(("orders", p), []), *_read_to_now(bootstrap["S"], "orders", p)]
            target = _read_to_now(bootstrap["T"], "S.orders", p, until=check.ends.get(p, 0))
        except KafkaException as exc:  # counted, and the soak goes on: its report says what happened
            run.plan_problems.append(f"plan at {check.at}: orders[{p}] unreadable to judge it: {exc}")
            continue
        truth = resume_cost(source, target, row.committed_offset, row.target_offset)
        said = (row.records_lost, row.records_reread, row.records_duplicated)
        true = (truth.lost, truth.reread, truth.duplicated)
        run.plans_judged += 1
        line = (
            f"plan at {check.at}: orders[{p}] committed {row.committed_offset} -> {row.target_offset} "
            f"({row.method}{', presumed' if row.copies_presumed else ''}, {row.unmapped_copies or 0} unmapped): "
            f"lost/re-read/duplicated {'/'.join(map(str, said))}, truth {'/'.join(map(str, true))}"
        )
        run.notes.append(line)
        if said != true:
            run.plan_problems.append(line)


def _log_ends(bootstrap: str, topic: str) -> dict[int, int]:
    with throwaway_reader({"bootstrap.servers": bootstrap}, "chaos") as consumer:
        return {p: partition_bounds(consumer, topic, p)[1] for p in range(partitions_of(bootstrap, topic))}


def recreate_accounts(run: Run, bootstrap: dict[str, str]) -> None:
    """``accounts`` on S deleted and created again under its producer's feet (stopped meanwhile:
    the broker creates no topic by itself), then a new producer writes the new life's keys. The
    truth of what went with the old topic: its records with no copy on T at the deletion."""
    if run.accounts is not None:
        run.accounts.stop()
    for p in range(PARTITIONS):
        run.earlier_lives.setdefault(("accounts", p), []).extend(read_partition(bootstrap["S"], "accounts", p))
    admin = AdminClient({"bootstrap.servers": bootstrap["S"]})
    admin.delete_topics(["accounts"])["accounts"].result(30)
    deadline = time.monotonic() + 60
    while True:  # the deletion finishes in the background: "already exists" until it has
        try:
            admin.create_topics([NewTopic("accounts", PARTITIONS, 1)])["accounts"].result(30)
            break
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    run.lives += 1
    run.accounts = accounts_producer(bootstrap["S"], run.lives)
    earlier = sum(len(run.earlier_lives[("accounts", p)]) for p in range(PARTITIONS))
    run.notes.append(f"recreate-topic: accounts on S deleted and created again (life {run.lives}; {earlier} before)")


def accounts_producer(bootstrap: str, life: int) -> SteadyProducer:
    """``accounts``' producer, started: 100 records/s, keys of their topic's life (unique across lives)."""
    producer = SteadyProducer(bootstrap, "accounts", 100, prefix=f"S-accounts-life{life}-", partitions=None)
    producer.start()
    return producer


def delete_unreplicated(run: Run, reps: Replicators, bootstrap: dict[str, str]) -> None:
    """Stop every replicator; records past what T holds of ``orders[0]`` are deleted on S, then restart.
    The truth of what was lost: S's new log start minus one past the last source record copied (by content)."""
    reps.stop_all()
    committed = _flow_position(bootstrap["S"], "S->T", "orders", 0)
    producer = Producer({"bootstrap.servers": bootstrap["S"], "log_level": 0})
    for i in range(200):
        producer.produce("orders", key=f"doomed-{uuid.uuid4().hex}-{i}".encode(), value=b"x", partition=0)
    producer.flush(60)
    source = _read_to_now(bootstrap["S"], "orders", 0)  # the producers go on writing meanwhile
    copied = {r.key for r in read_partition(bootstrap["T"], "S.orders", 0)}
    last_copied = max((r.offset for r in source if r.key in copied), default=-1)
    end = source[-1].offset + 1
    admin = AdminClient({"bootstrap.servers": bootstrap["S"]})
    (future,) = admin.delete_records([TopicPartition("orders", 0, end)]).values()
    future.result(30)
    low_before = source[0].offset if source else end
    lost = end - max(last_copied + 1, low_before)  # no markers in orders: offsets are records
    ranges = run.lost_ranges.setdefault(("orders", 0), [])
    if ranges and low_before <= max(hi for _lo, hi in ranges):
        # Kafka checkpoints a log start moved by DeleteRecords once a minute: a broker SIGKILLed
        # before that brings the deleted records back at its restart (deleted again now: counted once)
        run.notes.append(f"delete-unreplicated: S orders[0] log start was back at {low_before} after a restart")
    ranges.append((max(last_copied + 1, low_before), end - 1))
    earlier = {r.offset: r for r in run.deleted.get(("orders", 0), [])}
    # what the truth of earlier translations still needs
    run.deleted[("orders", 0)] = sorted({**earlier, **{r.offset: r for r in source}}.values(), key=lambda r: r.offset)
    run.notes.append(
        f"delete-unreplicated: S orders[0] log start -> {end}, {lost} records never copied "
        f"(last copied {last_copied}, the flow's committed position {committed})"
    )
    reps.ensure_running()


def _flow_position(bootstrap: str, flow: str, topic: str, partition: int) -> int | None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"mirrorlake.{flow}", "log_level": 0})
    try:
        (tp,) = consumer.committed([TopicPartition(topic, partition)], timeout=30)
        return tp.offset if tp.offset >= 0 else None
    finally:
        consumer.close()


def _read_to_now(bootstrap: str, topic: str, partition: int, until: int | None = None) -> list[Rec]:
    """The partition's records from its log start to its end as it is now, or to ``until`` if before
    (later records are not waited for: a partition written faster than it is read has no end to reach)."""
    conf = {"bootstrap.servers": bootstrap}
    with throwaway_reader(conf, "chaos") as consumer:  # listed: a broker just restarted may not know it yet
        low, end = partition_bounds(consumer, topic, partition, listed=True, timeout_s=120)
    end = end if until is None else min(end, until)
    if end <= low:
        return []
    reader = RangeReader(conf, "chaos")
    try:
        msgs = reader.read(topic, partition, low, end, timeout_s=120)
    finally:
        reader.close()
    return [
        Rec(partition, m.offset(), m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1])  # type: ignore[arg-type]
        for m in msgs
    ]


# -- the verdict -----------------------------------------------------------------------------------
@dataclass
class Figures:
    flow: str
    topic: str
    records: int = 0
    missing: int = 0
    duplicated: int = 0
    aborted: int = 0
    mapping_off: int = 0
    lost_truth: int = 0
    lost_said: int = 0
    gone: int = 0  # records of earlier lives of the topic (deleted) with no copy on the target
    revived: int = 0  # records deleted before their copy, back after a broker's restart (``_revived``)


def partitions_of(bootstrap: str, topic: str) -> int:
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30).topics.get(topic)
    return len(meta.partitions) if meta is not None and meta.error is None else 0


def judge_topic(run: Run, flow: str, source: str, target: str, topic: str, aborted: set[bytes]) -> Figures:
    src_alias, dst_alias = flow.split("->")
    remote = f"{src_alias}.{topic}"
    figures = Figures(flow, topic)
    events = state_events(target, STATE_TOPIC)
    index = MappingIndex()
    index.add([e for e in events if getattr(e, "flow", None) == flow])
    ranges: dict[int, list[tuple[int, int]]] = {}
    losses = {e.event_id: e for e in events if isinstance(e, RecordsLostBeforeCopy)}  # each process may say it
    for e in losses.values():
        if e.flow == flow and e.source_topic == topic:
            ranges.setdefault(e.partition, []).append((e.from_offset, e.to_offset - 1))
            run.notes.append(
                f"{flow} said: {topic}[{e.partition}] {e.from_offset}..{e.to_offset - 1} lost ({e.noticed})"
            )
    for p in range(partitions_of(source, topic)):
        src: list[Rec] = read_partition(source, topic, p)
        dst: list[Rec] = read_partition(target, remote, p) if p < partitions_of(target, remote) else []
        src_keys = {r.key for r in src}
        earlier = {r.key for r in run.earlier_lives.get((topic, p), [])} if flow == "S->T" else set()
        counts = Counter(r.key for r in dst)
        figures.records += len(src)
        revived = _revived(run, topic, p, src, counts.keys()) if flow == "S->T" else []
        missing = [r.offset for r in src if r.key not in counts and r.offset not in revived]
        figures.missing += len(missing)
        figures.revived += len(revived)
        if missing:  # where, to find the cause from the report alone
            run.notes.append(f"{flow} {topic}[{p}]: {len(missing)} missing at source offsets {_runs(missing)}")
        if revived:
            run.notes.append(
                f"{flow} {topic}[{p}]: {len(revived)} records deleted before their copy (said lost) are back on "
                f"{src_alias} at offsets {_runs(revived)}: its broker was killed before it checkpointed the log start"
            )
        figures.duplicated += sum(c - 1 for k, c in counts.items() if k in src_keys or k in earlier)
        run.notes += _second_copies(run, flow, topic, p, src, dst, counts)
        figures.gone += len(earlier - counts.keys())
        figures.aborted += sum(1 for k in counts if k in aborted and k not in src_keys)
        truth = _truth([*run.deleted.get((topic, p), []), *src], dst) if flow == "S->T" else _truth(src, dst)
        if src:
            off = []
            for c in range(src[0].offset, src[-1].offset + 2):
                got = index.translate(flow, topic, p, c)
                said_d, exact = (got.downstream if got else None), truth.translate(c)
                if said_d != exact:
                    off.append(f"{c}: {said_d} ({got.method if got else '-'}), exact {exact}")
            figures.mapping_off += len(off)
            if off:  # the first and last few, to find the cause from the report alone
                shown = off if len(off) <= 6 else [*off[:3], "...", *off[-3:]]
                run.notes.append(f"{flow} {topic}[{p}]: {len(off)} offsets translated off: {'; '.join(shown)}")
        if flow == "S->T":
            figures.lost_truth += _lost_for_good(run, topic, p, counts.keys())
        figures.lost_said += _said_for_good(run, topic, p, ranges.get(p, []), counts.keys(), flow)
    return figures


def _second_copies(
    run: Run, flow: str, topic: str, partition: int, src: list[Rec], dst: list[Rec], counts: Counter[bytes | None]
) -> list[str]:
    """Where a partition's second copies sit: the source offsets copied twice, the target offsets of the
    copies beyond the first and when (schedule time) the source produced them, to match to a fault."""
    twice = {k for k, c in counts.items() if c > 1}
    if not twice:
        return []
    at_source = [r.offset for r in src if r.key in twice]
    seen: set[bytes | None] = set()
    again = []
    for r in dst:
        if r.key in twice:
            if r.key in seen:
                again.append(r)
            seen.add(r.key)
    born = [(r.timestamp - run.started_ms) / 1000 for r in again if r.timestamp > 0]
    when = f", produced at {min(born):.1f}..{max(born):.1f} s" if born else ""
    of = _runs(at_source) or "of deleted records"
    where = _runs([r.offset for r in again])
    return [f"{flow} {topic}[{partition}]: {len(again)} second copies of source offsets {of}, at target {where}{when}"]


def _runs(offsets: list[int]) -> str:
    """``[3, 4, 5, 9]`` as ``3..5, 9`` (at most the first and last few runs)."""
    shown = [f"{a}..{b}" if b > a else str(a) for a, b in interval_union((o, o) for o in offsets)]
    return ", ".join(shown if len(shown) <= 8 else [*shown[:4], "...", *shown[-3:]])


def _log_lines(work: Path, topic: str, limit: int = 60) -> list[str]:
    """The replicators' log lines about ``topic``'s lives and positions: the story of a missing record."""
    wanted = ("created again", "offset reset", "lost", "restart", "assigned", "revoked", "recovered")
    out = []
    for log in sorted(work.glob("replicator-*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if topic in line and any(w in line for w in wanted):
                out.append(f"  {log.stem}: {line[:300]}")
    return out if len(out) <= limit else [*out[: limit // 2], "  ...", *out[-limit // 2 :]]


def _said_for_good(
    run: Run, topic: str, partition: int, spans: list[tuple[int, int]], on_target: Iterable[bytes], flow: str
) -> int:
    """Offsets the flow said lost before copy (processes and checks may say overlapping ranges: each
    once), less those whose record reached the target after all: Kafka undid the deletion (a broker
    SIGKILLed before it checkpointed the log start) and the flow copied them. True when said."""
    deleted = {r.offset: r.key for r in run.deleted.get((topic, partition), [])}
    copied = set(on_target)
    union = interval_union(spans)
    back = sum(1 for lo, hi in union for o in range(lo, hi + 1) if deleted.get(o) in copied)
    if back:
        run.notes.append(f"{flow} {topic}[{partition}]: {back} records said lost before copy came back and were copied")
    return sum(hi - lo + 1 for lo, hi in union) - back


def _revived(run: Run, topic: str, partition: int, src: list[Rec], on_target: Iterable[bytes | None]) -> list[int]:
    """Source offsets of records a fault deleted before their copy (in a range it lost) that are readable
    again and have no copy: Kafka keeps a log start moved by DeleteRecords in a checkpoint written once
    a minute (``log.flush.start.offset.checkpoint.interval.ms``), so a broker SIGKILLed before it brings
    them back. The flow said them lost when they were gone and its position is past them: not missing
    (a copy of something deleted), reported beside."""
    deleted = {r.key for r in run.deleted.get((topic, partition), [])}
    spans = interval_union(run.lost_ranges.get((topic, partition), []))
    copied = set(on_target)
    return [
        r.offset
        for r in src
        if r.key in deleted and r.key not in copied and any(lo <= r.offset <= hi for lo, hi in spans)
    ]


def _lost_for_good(run: Run, topic: str, partition: int, on_target: Iterable[bytes]) -> int:
    """Records deleted before their copy that never reached the target: a deletion Kafka undid
    (the broker SIGKILLed before it checkpointed the log start) let the flow copy them after all."""
    deleted = {r.offset: r.key for r in run.deleted.get((topic, partition), [])}
    copied = set(on_target)
    spans = interval_union(run.lost_ranges.get((topic, partition), []))
    return sum(1 for lo, hi in spans for o in range(lo, hi + 1) if deleted.get(o) not in copied)


def _truth(source: list[Rec], target: list[Rec]) -> GroundTruth:
    """Every copy on the target, matched by key to the source records (those deleted since included)."""
    return GroundTruth(copies_by_content(source, target))


def judge_groups(run: Run, config: MirrorlakeConfig, flow: str, source: str, target: str, group: str) -> list[str]:
    """Problems with ``group``'s checkpoints: each partition's, against its commit and the exact translation."""
    src_alias = flow.split("->")[0]
    consumer = Consumer({"bootstrap.servers": source, "group.id": group, "log_level": 0})
    try:
        parts = [TopicPartition("orders", p) for p in range(partitions_of(source, "orders"))]
        committed = {tp.partition: tp.offset for tp in consumer.committed(parts, timeout=30) if tp.offset >= 0}
    finally:
        consumer.close()
    try:
        checkpoints = translate_offsets(config, flow, group)
    except TranslationError as exc:
        return [f"{flow} {group}: {exc}"]
    problems = []
    for p, c in sorted(committed.items()):
        cp = checkpoints.get((f"{src_alias}.orders", p))
        src = read_partition(source, "orders", p)
        dst = read_partition(target, f"{src_alias}.orders", p)
        truth = _truth([*run.deleted.get(("orders", p), []), *src], dst) if flow == "S->T" else _truth(src, dst)
        if cp is None:
            problems.append(f"{flow} {group}[{p}]: committed {c}, no checkpoint")
        elif (cp.upstream_offset, cp.downstream_offset) != (c, truth.translate(c)):
            problems.append(
                f"{flow} {group}[{p}]: committed {c}, checkpoint {cp.upstream_offset}->{cp.downstream_offset}, "
                f"exact {truth.translate(c)}"
            )
    return problems


@dataclass(frozen=True)
class Verdict:
    """A soak's outcome: ``failures`` counts every must-be figure that is off (see the module)."""

    failures: int
    lines: list[str]
    figures: list[Figures]
    group_problems: list[str]
    plan_problems: list[str]
    final_exit: int

    @property
    def report(self) -> str:
        return "\n".join(self.lines)


def run_soak(seed: int, seconds: float, processes: int = 2, rate: int = 300, work: Path | None = None) -> Verdict:
    """One soak, judged."""
    work = work or Path(tempfile.mkdtemp(prefix="mirrorlake-chaos-"))
    run = Run(seed, seconds, processes, work, schedule(seed, seconds, processes))
    lines = [f"seed {seed}, {seconds:.0f} s, {processes} replicator processes per flow, ~{rate} records/s per producer"]
    lines += ["schedule:", *(f"  {f}" for f in run.faults)]
    run.cannot_partition = netsplit.unavailable()
    if run.cannot_partition is None:
        netsplit.clear()  # rules a killed run left
    with clusters(work) as (fleet, brokers):
        bootstrap = {a: brokers[a].bootstrap for a in SIDES}
        for side in SIDES:
            ensure_topic(bootstrap[side], "orders", PARTITIONS)
        ensure_topic(bootstrap["S"], "payments", PARTITIONS)
        ensure_topic(bootstrap["S"], "accounts", PARTITIONS)
        config = write_config(fleet, work / "chaos.yaml")
        run.config = config
        reps = Replicators(work / "chaos.yaml", processes, work, partitionable=run.cannot_partition is None)
        producers = [
            SteadyProducer(bootstrap[s], "orders", rate, prefix=f"{s}-orders-", partitions=None) for s in SIDES
        ]
        txn = TransactionalProducer(bootstrap["S"], "payments", seed)
        groups = [Group(bootstrap[s], f"chaos-app-{s}", "orders") for s in SIDES]
        workers: list[SteadyProducer | TransactionalProducer | Group] = [*producers, txn, *groups]
        for worker in workers:
            worker.start()
        run.accounts = accounts_producer(bootstrap["S"], run.lives)
        reps.ensure_running()
        started = time.monotonic()
        run.started_ms = int(time.time() * 1000)
        try:
            for fault in run.faults:
                time.sleep(max(0.0, fault.at_s - (time.monotonic() - started)))
                _log.info("fault: %s", fault)
                inject(run, fault, brokers, reps, bootstrap)
            time.sleep(max(0.0, seconds - (time.monotonic() - started)))
        except BaseException:
            reps.stop_all(signal.SIGKILL)  # a soak that fails stops its replicators, not only its brokers
            raise
        for worker in [*workers, *([run.accounts] if run.accounts else [])]:
            worker.stop()
        reps.stop_all()
        final = reps.start(0, "--until-caught-up")  # one process copies what is left, checkpoints, stops
        final.wait(600)
        lines.append(f"final run --until-caught-up exit {final.returncode}")
        aborted = txn.aborted
        figures = [
            judge_topic(run, "S->T", bootstrap["S"], bootstrap["T"], "orders", set()),
            judge_topic(run, "S->T", bootstrap["S"], bootstrap["T"], "payments", aborted),
            judge_topic(run, "S->T", bootstrap["S"], bootstrap["T"], "accounts", set()),
            judge_topic(run, "T->S", bootstrap["T"], bootstrap["S"], "orders", set()),
        ]
        problems = judge_groups(run, config, "S->T", bootstrap["S"], bootstrap["T"], "chaos-app-S")
        problems += judge_groups(run, config, "T->S", bootstrap["T"], bootstrap["S"], "chaos-app-T")
    lines += run.notes
    for f in figures:
        if f.missing:
            lines += [f"replicator log lines about {f.topic}:", *_log_lines(work, f.topic)]
    lines.append("flow  topic     records  missing  duplicated  aborted  mapping_off  lost(truth/said)  gone  revived")
    failures = 0
    for f in figures:
        lines.append(
            f"{f.flow:<5} {f.topic:<9} {f.records:>7}  {f.missing:>7}  {f.duplicated:>10}  {f.aborted:>7}  "
            f"{f.mapping_off:>11}  {f.lost_truth:>7}/{f.lost_said:<8}  {f.gone:>4}  {f.revived:>7}"
        )
        failures += f.missing + f.aborted + f.mapping_off + abs(f.lost_truth - f.lost_said)
        failures += f.duplicated if f.flow in EXACTLY_ONCE else 0  # read_committed: no second copy visible
    failures += len(problems) + (final.returncode != 0) + len(run.plan_problems)
    lines += [f"group: {p}" for p in problems] or ["groups: every checkpoint at its commit's exact translation"]
    lines += [f"plan off: {p}" for p in run.plan_problems] or [
        f"plans with S down: {run.plans_judged} partition rows, each equal to the truth"
    ]
    lines.append(f"replicator exits: {sorted(Counter(code for _i, code in reps.exits).items())}")
    lines.append(f"chaos_duplicated={sum(f.duplicated for f in figures)}")
    lines.append(f"chaos_failures={failures}")
    return Verdict(failures, lines, figures, problems, run.plan_problems, final.returncode)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--rate", type=int, default=300)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    verdict = run_soak(args.seed, args.minutes * 60, args.processes, args.rate)
    stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    text = "\n".join([f"date: {stamp}", *verdict.lines]) + "\n"
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 1 if verdict.failures else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
