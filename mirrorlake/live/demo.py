"""``mirrorlake demo --live``: a small live system that keeps running, and the incidents to try on it.

It starts the local clusters, then five background processes (``live.processes``): the traffic
(``live.traffic``: steady orders with bursts, transactional payments, a group keeping up and a
lagging one), ``mirrorlake replicate`` (every enabled flow of the config), ``mirrorlake observe
--follow`` (watermarks keep flowing while the replicator is down, so the RPO stays true during an
incident), ``mirrorlake lakehouse serve`` and ``mirrorlake dashboard``; it returns once the
dashboard answers and gold shows the flow (its offset mapping has rows). ``mirrorlake demo stop`` (and
``make down``) stops them. The incidents (``incident``) are what an operator meets: the
replicator stopped for a while, the source cluster's broker killed.
"""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from deltalake.exceptions import DeltaError

from ingest.paths import LakehousePaths
from lakehouse.duck.delta import row_count
from mirrorlake.live.processes import DemoProcess, demo_dir
from mirrorlake.live.traffic import ORDERS, PAYMENTS
from mirrorlake.localkafka import local_brokers, up
from mirrorlake.progress import Steps
from mirrorlake.traffic import ensure_topic
from replicator.config import MirrorlakeConfig
from replicator.errors import ConfigError, MirrorlakeError

__all__ = ["LiveDemo", "LiveDemoError", "SERVE_INTERVAL_S"]

_log = logging.getLogger(__name__)

SERVE_INTERVAL_S = 10.0  # between two lakehouse refreshes
# Spark's first start resolves its packages (minutes on a cold cache), and on a loaded machine
# (CI's) the first refresh that holds copies came 7.5 min after the start
_READY_S = 600.0


class LiveDemoError(MirrorlakeError):
    """A part of the live demo did not start; the message names it and the tail of its log."""


@dataclass(frozen=True)
class LiveDemo:
    """The live demo of ``config`` (read from ``config_path``), its dashboard on ``port``."""

    config_path: Path
    config: MirrorlakeConfig
    port: int = 8501

    def parts(self) -> dict[str, DemoProcess]:
        """Its background processes, in the order they start (stopped in reverse)."""
        c = str(self.config_path)
        d = demo_dir(Path(self.config.local_kafka.work_dir))
        return {
            "traffic": DemoProcess("traffic", ("demo", "-c", c, "traffic"), d),
            "replicator": DemoProcess("replicator", ("replicate", "-c", c), d),
            "observer": DemoProcess(
                "observer", ("observe", "-c", c, "--follow", "--interval", "5", "--stale-after", "15"), d
            ),
            "serve": DemoProcess("serve", ("lakehouse", "serve", "-c", c, "--interval", f"{SERVE_INTERVAL_S:g}"), d),
            "dashboard": DemoProcess(  # it becomes Streamlit's server (exec)
                "dashboard", ("dashboard", "-c", c, "--port", str(self.port)), d, ("streamlit", c, str(self.port))
            ),
        }

    @property
    def source(self) -> str:
        """The alias of the cluster the traffic runs on: the first enabled flow's source."""
        flows = self.config.enabled_flows()
        if not flows:
            raise ConfigError(f"{self.config_path}: the live demo needs an enabled flow")
        return flows[0].source

    def start(self, steps: Steps) -> None:
        """Clusters, topics, then every part; returns once the dashboard and the first gold tables are there."""
        with steps.step("start the local Kafka clusters"):
            up(self.config)
        bootstrap = self.config.cluster(self.source).bootstrap_servers
        with steps.step(f"create {ORDERS} and {PAYMENTS} on {self.source}"):
            for topic in (ORDERS, PAYMENTS):
                ensure_topic(bootstrap, topic, 3)
        parts = self.parts()
        try:
            for name, part in parts.items():
                with steps.step(f"start {name} (its output in {part.log})"):
                    part.start()
            with steps.step(f"wait for the dashboard on http://127.0.0.1:{self.port}"):
                self._wait(lambda: _answers(f"http://127.0.0.1:{self.port}/_stcore/health"), "dashboard", parts)
            with steps.step("wait for the lakehouse to show the flow (Spark starts, bronze, silver, gold)"):
                mapping = LakehousePaths.of(self.config.lakehouse).gold("offset_mapping")
                since = time.time()  # a lakehouse of an earlier run is there already: this run's commit
                self._wait(lambda: _shows_copies(mapping, since), "serve", parts)
        except BaseException:  # a demo that did not start leaves none of its processes behind
            self.stop()
            raise

    def _wait(self, ready: Callable[[], bool], name: str, parts: dict[str, DemoProcess]) -> None:
        deadline = time.monotonic() + _READY_S
        while not ready():
            for part in parts.values():
                if part.pid() is None:
                    raise LiveDemoError(f"demo: {part.name} exited; the end of {part.log}:\n{_tail(part.log)}")
            if time.monotonic() > deadline:
                raise LiveDemoError(f"demo: {name} not ready after {_READY_S:.0f} s; see {parts[name].log}")
            time.sleep(1.0)

    def stop(self) -> list[str]:
        """Stop every part (in reverse order); the names of those that were running."""
        return [name for name, part in reversed(self.parts().items()) if part.stop()]

    def running(self) -> dict[str, int | None]:
        return {name: part.pid() for name, part in self.parts().items()}

    def stop_replicator(self, seconds: float, say: Callable[[str], None]) -> None:
        """The incident "the replicator is down": stopped (SIGTERM) for ``seconds``, then started again."""
        replicator = self.parts()["replicator"]
        if not replicator.stop():
            raise LiveDemoError("demo: the replicator does not run (start the live demo first)")
        say(f"replicator stopped; records keep arriving on {self.source}; it starts again in {seconds:g} s")
        time.sleep(seconds)
        replicator.start()
        say("replicator started again: watch the records at risk fall on the Failover page")

    def kill_source(self, seconds: float, say: Callable[[str], None]) -> None:
        """The incident "the source cluster is gone": its broker SIGKILLed, started again ``seconds`` later."""
        (broker,) = [b for b in local_brokers(self.config) if b.alias == self.source]
        broker.kill()
        say(
            f"cluster {self.source} killed: plan a failover now (mirrorlake failover plan); it is back in {seconds:g} s"
        )
        time.sleep(seconds)
        broker.start()
        broker.wait_ready()
        say(f"cluster {self.source} is back")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - a 127.0.0.1 URL we built
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no output)"


def _shows_copies(mapping: Path, since: float) -> bool:
    """This run's refresh has committed gold ``offset_mapping`` with rows: the dashboard shows the
    flow (a first refresh before any offset sync reached bronze commits it empty)."""
    log = mapping / "_delta_log"
    if not log.exists() or not any(f.stat().st_mtime >= since for f in log.iterdir()):
        return False
    try:
        return bool(row_count(mapping))
    except DeltaError:  # a commit being written: the next look
        return False
