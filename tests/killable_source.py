"""A source cluster of a module's own that tests may SIGKILL and restart (the session's are shared).

Import the fixture into a test module (``from tests.killable_source import source_cluster``; tests ask
for ``source``): each module
gets one cluster ``X``, started on free ports and stopped by PID at the module's end.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from mirrorlake.localkafka import down, local_brokers, up
from mirrorlake.localkafka.ports import find_free_port_pair
from replicator.config import MirrorlakeConfig, parse_config
from tests.waiting import wait_for

__all__ = ["Source", "source_cluster"]


@dataclass
class Source:
    fleet: MirrorlakeConfig
    bootstrap: str

    def kill(self) -> None:
        (broker,) = local_brokers(self.fleet)
        pid = broker.pid()
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not broker.is_running(), "broker X gone")

    def restart(self) -> None:
        up(self.fleet)  # a no-op when it runs


@pytest.fixture(scope="module", name="source")
def source_cluster(tmp_path_factory) -> Iterator[Source]:
    port = find_free_port_pair()
    fleet = parse_config(
        {
            "clusters": {"X": {"bootstrap_servers": f"127.0.0.1:{port}"}},
            "local_kafka": {"work_dir": str(tmp_path_factory.mktemp("cluster-x"))},
        },
        source="tests/killable_source.py",
    )
    try:
        up(fleet)
        yield Source(fleet, f"127.0.0.1:{port}")
    finally:
        down(fleet)
