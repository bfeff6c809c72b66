"""A flow's counters: written by the flow thread, read by the metrics endpoint and ``health``."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from replicator.metrics.mm2_metrics import Mm2Metrics, WindowedValue
from replicator.metrics.observability import LatencyHistogram

__all__ = ["FlowStats"]


def _none_in_flight() -> int:
    return 0


def _not_leading() -> bool:
    return False


def _waiting_for_nothing() -> dict[str, str]:
    return {}


@dataclass
class FlowStats:
    """Plain counters the flow thread updates and the metrics endpoint reads (no hot-path locks)."""

    records: int = 0
    bytes: int = 0
    batches: int = 0  # consumed batches copied: records / batches is what each turn of the loop amortizes
    syncs: int = 0
    skipped_cycle: int = 0
    revoked: int = 0  # partitions given up in rebalances (cooperative: only those that move)
    state: str = "starting"  # starting | running | stopped | failed
    copy_path: str = ""  # compiled | python: how records are produced (the flow's copy_engine, resolved)
    error: str | None = None
    assigned: list[tuple[str, int]] = field(default_factory=list)
    lag: dict[tuple[str, int], int] = field(default_factory=dict)
    last_record_age_s: float | None = None
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    task_errors: dict[str, str] = field(default_factory=dict)  # state task -> its last error
    paused: bool = False  # reading paused: the target is down or its queue is full
    recoveries: int = 0  # outages the flow waited out
    stalled: str | None = None  # records behind, no outage, no progress (flow.stall): why health is degraded
    rejoins: int = 0  # consumer group joins forced after a loss with no new assignment (flow.rejoin)
    topics_recreated: int = 0  # source topics found deleted and created again (flow.topic_lives)
    remote_topics_recreated: int = 0  # remote topics found deleted (and created again) (flow.remote_lives)
    records_lost_before_copy: int = 0  # source offsets deleted before the flow read them (flow.topic_lives)
    turned_at: float = field(default_factory=time.monotonic)  # the copy loop's last turn (liveness)
    source: str = ""  # the flow's source cluster alias (a label of the MM2-named metrics)
    target: str = ""
    mm2: Mm2Metrics = field(default_factory=Mm2Metrics)  # per partition, named as MM2's connectors
    metric_names_formats: tuple[str, ...] = ("legacy",)  # the layouts those take (flow.metric_names_formats)
    # read by ``connect_metrics`` at scrape time (the runner sets them when it wires the flow):
    connectors: tuple[str, ...] = ("MirrorSourceConnector",)  # the MM2 connectors this flow stands for
    subscribed: bool = False  # the consumer subscribed to at least one topic
    in_flight: Callable[[], int] = _none_in_flight  # records produced, not yet acknowledged
    leading: Callable[[], bool] = _not_leading  # this process runs the flow's state tasks
    # side -> what the flow waits for (an outage), read live: a wait that starts inside a blocking
    # call (an exactly-once commit retried while the target is down) shows before the loop turns again
    waiting: Callable[[], dict[str, str]] = _waiting_for_nothing
    offset_commit_ms: WindowedValue = field(default_factory=WindowedValue)  # the commits' timing
