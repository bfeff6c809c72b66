"""A watermark's time is never later than the reading of its log end (issue 60).

A plan's "not replicated at that observation" counts the source's records up to the watermark's log
end: stamped after the positions and the unreplicated tail were read (seconds under load), the log
end was older than its time, and a plan left out records acknowledged in between (about 14,000 per
partition in one run of four). Pure: the clusters are stand-ins, the clock is the events' own
(``events.stamped_by``), advanced by every call that reads a cluster.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

from replicator.config import FlowConfig, parse_config
from replicator.events import Watermark, stamped_by
from replicator.metadata.topics import RemoteTopic
from replicator.tasks import watermarks
from replicator.tasks.watermarks import WatermarkTask


def test_the_log_end_is_read_after_the_watermark_s_time(monkeypatch):
    clock = itertools.count(1_000, 100)  # every reading of the clock is 100 ms later
    now = iter(clock)
    read_at: dict[str, int] = {}

    def marks(_admin, partitions):  # noqa: ANN001
        read_at["marks"] = next(now)
        return {tp: (0, 500, None, None) for tp in partitions}

    class Tails:
        def __init__(self, *_args) -> None:  # noqa: ANN002
            pass

        def measure(self, wanted):  # noqa: ANN001
            next(now)  # reading the unreplicated tail takes time
            return {}

        def close(self) -> None:
            pass

    monkeypatch.setattr(watermarks, "partition_watermarks", marks)
    monkeypatch.setattr(watermarks, "TailReader", Tails)
    monkeypatch.setattr(watermarks, "admin_client", lambda _conf: object())
    config = parse_config({"clusters": {"A": {"bootstrap_servers": "a:1"}, "B": {"bootstrap_servers": "b:1"}}})
    flow = FlowConfig(source="A", target="B")
    emitted: list[Watermark] = []
    ctx = SimpleNamespace(
        config=config, flow=flow, replicator_id="r", emit=lambda event, _cb=None: emitted.append(event),
        remote_topics=lambda: {"orders": RemoteTopic("orders", "A.orders", 1)},
    )  # fmt: skip
    task = WatermarkTask(ctx, {}, {}, read_positions=lambda: SimpleNamespace(positions={("orders", 0): 400}))  # type: ignore[arg-type]
    with stamped_by(lambda: "id", lambda: next(now)):
        task.run()
    source = [w for w in emitted if w.side == "source"]
    assert source and source[0].log_end_offset == 500
    assert source[0].observed_at_ms <= read_at["marks"]  # the log end holds all acknowledged before its time
