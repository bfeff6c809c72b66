"""State reads vs the age of the state log: full replay against snapshot + tail, side by side.

For each size N, the bench writes N events to a fresh state topic on a local cluster (85%
offset syncs over 100 partitions, 10% checkpoints of 100 groups over those partitions, 5% source
watermarks of those partitions, the mix a busy deployment writes), then measures, each in a fresh
process (time and peak RSS):

- ``translate``: ``translate_offsets`` for one group (what ``mirrorlake translate`` and a failing-over
  consumer call);
- ``view start``: a flow's ``StateView`` first refresh (what starting the state tasks costs);
- ``failover plan``: ``replicator.failover.plan_failover`` for the flow's 100 groups (what
  ``mirrorlake failover plan`` does: the state read, then group activity and positions by time
  asked of the cluster).

once without a snapshot (a full replay, as before snapshots existed) and once with the snapshot the
state tasks write, followed by 10,000 newer events in the log (the tail a reader still replays).

    .venv/bin/python -m bench.state_reads [--sizes 100000,1000000,10000000] [--replay-up-to 1000000]

Last line: ``translate_seconds_<largest size>=<seconds with the snapshot>``.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer

from mirrorlake.localkafka import down, up
from mirrorlake.localkafka.ports import find_free_port_pair
from mirrorlake.traffic import ensure_topic
from replicator.client.state_snapshot import write_snapshot
from replicator.config import MirrorlakeConfig, parse_config
from replicator.events import Checkpoint, OffsetSync, SyncReason, Watermark, encode
from replicator.kafka.state_log import key_of

_log = logging.getLogger("bench.state_reads")
FLOW, PARTITIONS, GROUPS, TAIL = "A->B", 100, 100, 10_000
KINDS = ("translate", "view start", "failover plan")


def cluster_config(work_dir: Path, state_topic: str) -> MirrorlakeConfig:
    port = find_free_port_pair()
    return parse_config(
        {
            "clusters": {"B": {"bootstrap_servers": f"127.0.0.1:{port}"}},
            "state_topic": state_topic,
            "local_kafka": {"work_dir": str(work_dir)},
        },
        source="bench/state_reads.py",
    )


def _events(start: int, count: int, upstream_base: list[int]):
    """``count`` events from index ``start`` on: syncs of growing offsets, every tenth a checkpoint,
    every twentieth round over the partitions a source watermark of each."""
    for i in range(start, start + count):
        p = i % PARTITIONS
        if (i // PARTITIONS) % 20 == 5 and i % 10 != 9:
            u = upstream_base[p]
            yield Watermark(
                flow=FLOW, cluster="A", side="source", topic="orders", source_topic="orders", partition=p,
                log_start_offset=0, log_end_offset=u + 11, observed_at_ms=i, read_position=u + 1,
                position_source="flow", unreplicated_records=10, unreplicated_bytes=10_240,
                oldest_unreplicated_timestamp_ms=i - 1, replicator_id="bench", emitted_at_ms=i,
            )  # fmt: skip
        elif i % 10 == 9:
            group = f"group-{(i // 10) % GROUPS}"
            u = upstream_base[p]
            yield Checkpoint(
                flow=FLOW, source_cluster="A", target_cluster="B", group=group, source_topic="orders",
                target_topic="A.orders", partition=p, upstream_offset=u, downstream_offset=u + 5,
                method="exact", error_bound=0, replicator_id="bench",
            )  # fmt: skip
        else:
            # every 100th record synced (MM2's offset.lag.max); every 50th sync follows a gap in the
            # source (transaction markers): ~0.02 segments per sync, as measured on real flows
            gap = (i // PARTITIONS) % 50 == 0
            u = upstream_base[p] = upstream_base[p] + (102 if gap else 100)
            yield OffsetSync(
                flow=FLOW, source_cluster="A", target_cluster="B", source_topic="orders", target_topic="A.orders",
                partition=p, upstream_offset=u, downstream_offset=u + 5, upstream_timestamp_ms=0,
                reason=SyncReason.UPSTREAM_GAP if gap else SyncReason.LAG_MAX,
                previous_upstream_offset=u - 3 if gap else None, previous_downstream_offset=u + 2 if gap else None,
                replicator_id="bench",
            )  # fmt: skip


def _produce(bootstrap: str, topic: str, events) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "compression.type": "lz4"})
    for event in events:
        while True:
            try:
                producer.produce(topic, value=encode(event), key=key_of(event))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    producer.flush(120)


_PROBE = """
import json, sys, time
from replicator.config import parse_config
config = parse_config(json.loads(sys.argv[2]), source="probe")
started = time.monotonic()
if sys.argv[1] == "translate":
    from replicator.client.translation import translate_offsets
    n = len(translate_offsets(config, "A->B", "group-7"))
elif sys.argv[1] == "failover plan":
    from replicator.failover import plan_failover
    n = len(plan_failover(config, "A->B").groups)
else:
    from replicator.tasks.base import StateView
    view = StateView(config, config.flow("A->B"))
    view.refresh()
    n = len(view.index.partitions("A->B"))
    view.close()
# VmHWM: this process's peak RSS (ru_maxrss would include the parent's peak, kept across exec)
hwm_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
rss_mb = hwm_kb / 1024
print(json.dumps({"seconds": time.monotonic() - started, "rss_mb": rss_mb, "n": n}))
"""


def _probe(kind: str, config_doc: dict) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, kind, json.dumps(config_doc)], capture_output=True, text=True, timeout=3600
    )
    if out.returncode != 0:
        raise RuntimeError(f"{kind} probe failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_size(bootstrap: str, size: int, replay: bool = True) -> list[tuple[str, int, str, dict]]:
    from replicator.client.state_snapshot import FlowSnapshot
    from replicator.tasks.base import StateView

    state_topic = f"mirrorlake.bench-{uuid.uuid4().hex[:8]}"
    ensure_topic(bootstrap, state_topic, 4)
    ensure_topic(bootstrap, "A.orders", PARTITIONS)  # the plan looks positions up on the target topic
    base = [0] * PARTITIONS
    started = time.monotonic()
    _produce(bootstrap, state_topic, _events(0, size, base))
    _log.info("%d events written in %.1f s", size, time.monotonic() - started)
    doc = {
        "clusters": {"A": {"bootstrap_servers": bootstrap}, "B": {"bootstrap_servers": bootstrap}},
        "flows": [{"source": "A", "target": "B"}],
        "state_topic": state_topic,
    }
    rows = [(kind, size, "full replay", _probe(kind, doc)) for kind in KINDS] if replay else []

    # What the state tasks do: follow the log, then write the snapshot (timed as its own row).
    config = parse_config(doc, source="bench")
    view = StateView(config, config.flow(FLOW))
    started = time.monotonic()
    view.refresh()  # reads to the end (it gives up only when nothing arrives for 30 s)
    snap: FlowSnapshot = view.snapshot()
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    _ensure_snapshot_topic(bootstrap, state_topic)
    records = write_snapshot(producer, state_topic, snap, None)
    view.close()
    rows.append(("snapshot write", size, f"{records} records", {"seconds": time.monotonic() - started, "rss_mb": 0}))
    _produce(bootstrap, state_topic, _events(size, TAIL, base))
    rows += [(kind, size, f"snapshot + {TAIL:,} tail", _probe(kind, doc)) for kind in KINDS]
    return rows


def _ensure_snapshot_topic(bootstrap: str, state_topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    from replicator.client.state_snapshot import SNAPSHOT_CONFIG, snapshot_topic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = snapshot_topic(state_topic)
    admin.create_topics([NewTopic(name, 1, replication_factor=-1, config=dict(SNAPSHOT_CONFIG))])[name].result(30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated event counts")
    parser.add_argument(
        "--replay-up-to", type=int, default=None, help="measure full replays only up to this size (they grow linearly)"
    )
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    work_dir = Path(tempfile.mkdtemp(prefix="bench-state-reads-"))
    config = cluster_config(work_dir, "unused")
    rows = []
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    try:
        up(config)
        for size in sizes:
            replay = args.replay_up_to is None or size <= args.replay_up_to
            rows += run_size(config.cluster("B").bootstrap_servers, size, replay)
    finally:
        down(config)
        shutil.rmtree(work_dir, ignore_errors=True)
    print()
    load_after = Path("/proc/loadavg").read_text().split()[:3]
    print(f"2 cores; load average at start {' '.join(load_before)}, at end {' '.join(load_after)}")
    print(f"{'read':14} {'events':>11} {'how':28} {'seconds':>8} {'peak MB':>8}")
    for kind, size, how, m in rows:
        print(f"{kind:14} {size:>11,} {how:28} {m['seconds']:>8.2f} {m['rss_mb']:>8.0f}")
    print()
    for size in sizes:
        for kind in ("translate", "failover plan"):
            full = next((m for k, s, h, m in rows if k == kind and s == size and h == "full replay"), None)
            snap = next(m for k, s, h, m in rows if k == kind and s == size and h.startswith("snapshot +"))
            if full is not None:
                print(f"{kind.replace(' ', '_')}_speedup_{size}={full['seconds'] / snap['seconds']:.1f}")
    last = next(m for k, s, h, m in rows if k == "translate" and s == sizes[-1] and h.startswith("snapshot +"))
    print(f"translate_seconds_{sizes[-1]}={last['seconds']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
