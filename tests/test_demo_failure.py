"""A failed demo stops the brokers it started, and only those (issue 33, item 9).

``demo`` with a config whose later steps failed left the brokers it had started running. Two real
local brokers on free ports: A is running before the demo, B is started by it; the demo's steps
after the start fail (replaced by one that raises), and afterwards B is stopped, A still runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import mirrorlake.demo as demo
from mirrorlake.localkafka import down, local_brokers, up
from mirrorlake.localkafka.ports import find_free_port_pair
from replicator.config import parse_config

pytestmark = pytest.mark.kafka


def test_a_failed_demo_stops_what_it_started_and_nothing_else(tmp_path: Path, monkeypatch):
    a = find_free_port_pair()
    b = find_free_port_pair({a, a + 1})
    data = {
        "clusters": {"A": {"bootstrap_servers": f"127.0.0.1:{a}"}, "B": {"bootstrap_servers": f"127.0.0.1:{b}"}},
        "flows": [{"source": "A", "target": "B", "topics": [demo.DEMO_TOPIC]}],
        "local_kafka": {"work_dir": str(tmp_path / "clusters")},
    }
    config = parse_config(data, source="test_demo_failure")
    only_a = parse_config({**data, "clusters": {"A": data["clusters"]["A"]}, "flows": []}, source="test_demo_failure")

    def fails(*_args, **_kwargs):
        raise RuntimeError("a step after the brokers started failed")

    monkeypatch.setattr(demo, "_demo_steps", fails)
    try:
        up(only_a)
        with pytest.raises(RuntimeError, match="a step after the brokers started failed"):
            demo.run_demo(config)
        running = {broker.alias: broker.is_running() for broker in local_brokers(config)}
        assert running == {"A": True, "B": False}
    finally:
        down(config)


def test_the_summary_names_the_remote_topic_the_policy_gives(tmp_path: Path):
    """Issue 38: the summary said "topic orders -> B" for A.orders on B."""
    from types import SimpleNamespace

    config = parse_config(
        {"clusters": {"A": {"bootstrap_servers": "127.0.0.1:1"}, "B": {"bootstrap_servers": "127.0.0.1:3"}},
         "flows": [{"source": "A", "target": "B"}], "lakehouse": {"path": str(tmp_path / "lh")}},
        source="test_demo_failure",
    )  # fmt: skip
    traffic = SimpleNamespace(plain_records=10, committed_records=4, aborted_records=2)
    build = SimpleNamespace(bronze_rows=5, offset_syncs=3, mapping_segments=2, quarantined=0)
    summary = demo.DemoSummary("A->B", traffic, 14, build, 0, 3, 3, [(0, 1)], [("A.orders", 0, 3, 3)])  # type: ignore[arg-type]
    first = demo.render_summary(summary, config).splitlines()[1]
    assert first == f"mirrorlake demo: flow A->B, topic {demo.DEMO_TOPIC} on A -> A.{demo.DEMO_TOPIC} on B"
